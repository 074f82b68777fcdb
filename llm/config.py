"""Provider entries and budgets, as configuration: a provider is chosen without code."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, model_validator

__all__ = ["Budgets", "ModelServer", "ProviderConfig", "ProviderType"]

ProviderType = Literal["ollama", "openai_compat", "none"]


class Budgets(BaseModel):
    """Hard limits enforced by us around any provider (see DESIGN.md, budgets)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    connect_s: float = Field(default=2.0, gt=0)
    first_token_s: float = Field(default=45.0, gt=0)  # covers a cold load
    idle_s: float = Field(default=15.0, gt=0)
    total_s: float = Field(default=120.0, gt=0)
    num_predict: int = Field(default=400, ge=1, le=8192)
    loop_repeats: int = Field(default=24, ge=2)  # identical chunks in a row before we stop
    retries: int = Field(default=2, ge=0, le=5)  # before the first token only
    retry_backoff_s: float = Field(default=0.25, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> Budgets:
        if self.first_token_s > self.total_s or self.idle_s > self.total_s:
            raise ValueError("first_token_s and idle_s cannot exceed total_s")
        return self


class ModelServer(BaseModel):
    """One server of the model: where it listens and how many answers it generates at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: HttpUrl
    parallel: int = Field(default=1, ge=1, le=64)


class ProviderConfig(BaseModel):
    """The model and its server(s). The API key is read from an environment variable, never
    stored. ``servers`` lists several servers of the same model (each turn goes to one with a
    free slot, the next when one is down); empty, ``base_url`` and ``parallel`` are the one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="local", pattern=r"^[a-z0-9][a-z0-9_-]*$")
    type: ProviderType = "ollama"
    base_url: HttpUrl = HttpUrl("http://127.0.0.1:11434")
    model: str = "qwen2.5:1.5b-instruct"
    data_class: Literal["local", "external"] = "local"
    api_key_env: str | None = None
    parallel: int = Field(default=1, ge=1, le=64)  # the server's parallel slots
    servers: tuple[ModelServer, ...] = ()

    def endpoints(self) -> list[ModelServer]:
        """Every server of the model, in the order turns try them."""
        return list(self.servers) or [ModelServer(base_url=self.base_url, parallel=self.parallel)]

    def for_server(self, server: ModelServer) -> ProviderConfig:
        """This configuration, pointed at one of its servers."""
        return self.model_copy(
            update={"base_url": server.base_url, "parallel": server.parallel, "servers": ()}
        )

    def api_key(self) -> str | None:
        """The key from the environment at call time; None when unset."""
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env) or None
