"""One ``Settings`` for the whole service: defaults embedded, overridden by a YAML file
(``NUISANCES_CONFIG=path.yaml``) and by environment variables (prefix ``NUISANCES_``, nested
with ``__``: ``NUISANCES_PROVIDER__MODEL=qwen2.5:3b``). Validated at start-up; an invalid value
stops the service with a message that names the setting.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from llm.config import Budgets, ProviderConfig
from llm.policy import PolicyConfig
from llm.pseudonymize import PseudonymizeConfig

__all__ = ["AdmissionSettings", "LimitsSettings", "Settings", "SettingsError", "load_settings"]


class AdmissionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_waiting: int = Field(default=4, ge=0, le=100)
    wait_s: float = Field(default=20.0, ge=0)
    quota_per_device: int | None = Field(default=200, ge=1)
    quota_global: int | None = Field(default=2_000, ge=1)
    # Turns one device may have in flight at once; more are refused (429) with their card.
    device_turns: int = Field(default=2, ge=1, le=20)
    # Waiting places one device may hold: the others stay open to other devices.
    device_waiting: int = Field(default=1, ge=1, le=100)
    retry_after_s: int = Field(default=5, ge=1)  # told to a refused client (busy, too many)


class LimitsSettings(BaseModel):
    """What keeps the service up under abuse (per API process)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_connections: int = Field(default=1_000, ge=10)
    header_timeout_s: float = Field(default=10.0, gt=0)  # request line and headers
    body_timeout_s: float = Field(default=10.0, gt=0)  # between two pieces of a body
    # Longer than the idle time clients are told to keep (60 s): the client always closes
    # an idle connection first, so a request never meets a connection the server is closing.
    keep_alive_s: float = Field(default=75.0, gt=0)
    auth_failures: int = Field(default=20, ge=1)  # failed tokens per address per window
    auth_window_s: float = Field(default=60.0, gt=0)
    auth_concurrent: int = Field(default=4, ge=1)  # token lookups at once per address
    log_interval_s: float = Field(default=10.0, gt=0)  # one line per condition per interval
    # Addresses of reverse proxies whose X-Forwarded-For is believed (comma-separated).
    forwarded_allow_ips: str = "127.0.0.1"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="NUISANCES_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    database_url: str = "sqlite:///data/nuisances.db"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    provider: ProviderConfig = ProviderConfig()
    budgets: Budgets = Budgets()
    admission: AdmissionSettings = AdmissionSettings()
    limits: LimitsSettings = LimitsSettings()
    warm_up: bool = True  # load the model at start-up (in the background)
    message_max_chars: int = Field(default=2_000, ge=1, le=20_000)
    body_max_bytes: int = Field(default=32_768, ge=1_024)
    history_turns: int = Field(default=6, ge=0, le=50)
    contact_style: Literal["inline", "name"] = "inline"
    heartbeat_s: float = Field(default=10.0, gt=0)
    # A retry waits at most this long for its first try (and never past the first's lease).
    retry_wait_s: float = Field(default=150.0, gt=0)
    # A running turn's row is ours for this long, renewed every spool_replay_s: a retry of a
    # turn whose process crashed takes it over once the lease runs out.
    turn_lease_s: float = Field(default=15.0, ge=5.0)
    spool_max_bytes: int = Field(default=50_000_000, ge=10_000)  # turns kept during an outage
    spool_replay_s: float = Field(default=2.0, gt=0)  # how often the spool is replayed
    token_refresh_s: float = Field(default=10.0, gt=0)  # cached tokens re-checked this often
    token_cache_max_age_s: float = Field(default=60.0, gt=0)  # accepted without the database
    directory_reload_s: float = Field(default=30.0, gt=0)
    health_interval_s: float = Field(default=30.0, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    policy: PolicyConfig = PolicyConfig()
    pseudonymize: PseudonymizeConfig = PseudonymizeConfig()
    answer_max_chars: int = Field(default=2_500, ge=100)
    cache_ttl_s: float = Field(default=7 * 24 * 3600, ge=0)  # 0 disables the answer cache
    data_dir: Path = Path("data")  # audit log and the cache's key live here
    # One secret for every API process and machine of a deployment (cache MACs, keyed hashes,
    # spool key). Unset: a key file in data_dir, which is right for one machine only.
    secret: SecretStr | None = Field(default=None, min_length=32)
    # API processes (`nuisances serve`); more than one needs PostgreSQL (shared state).
    workers: int = Field(default=1, ge=1, le=32)
    audit_max_bytes: int = Field(default=10_000_000, ge=10_000)
    audit_backups: int = Field(default=5, ge=0)
    create_first_token: bool = True  # the first `serve` with no device creates and prints one

    @field_validator("secret", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if value == "" else value  # compose passes an unset variable as ""

    @property
    def audit_path(self) -> Path:
        return self.data_dir / "audit" / "audit.jsonl"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("NUISANCES_CONFIG")
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=Path(config_file)))
        return tuple(sources)


class SettingsError(RuntimeError):
    """Settings that do not validate, explained setting by setting."""


def load_settings(**overrides: object) -> Settings:
    """The settings, or ``SettingsError`` with one line per invalid setting."""
    config_file = os.environ.get("NUISANCES_CONFIG")
    if config_file and not Path(config_file).is_file():
        raise SettingsError(f"NUISANCES_CONFIG={config_file}: no such file")
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = [f"invalid settings ({exc.error_count()}):"]
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"])
            env = "NUISANCES_" + "__".join(str(p).upper() for p in error["loc"])
            lines.append(f"  {name} (env {env}): {error['msg']}")
        raise SettingsError("\n".join(lines)) from exc
