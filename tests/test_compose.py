"""The deployment files: compose.yaml (and its PostgreSQL override) read by a real Compose, the
Dockerfile, and the wiring between them, ``Settings`` and the proxy's deploy/nginx/nginx.conf
(which tests/test_proxy.py runs in a real nginx).

Compose is ``docker compose`` (the v2 plugin) or the standalone ``docker-compose`` (Debian's
package: ``apt-get install -y docker-compose``). ``config`` needs no Docker engine. Without a
Compose binary the Compose cases are skipped, unless NUISANCES_TEST_REQUIRE_COMPOSE=1 (set by
CI), which turns that into a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import BaseModel
from sqlalchemy.engine import make_url

from server.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
POSTGRES_OVERRIDE = ROOT / "deploy" / "compose.postgres.yaml"
NGINX_CONF = ROOT / "deploy" / "nginx" / "nginx.conf"
TLS_DIR = ROOT / "deploy" / "tls"
DOCKERFILE = ROOT / "Dockerfile"
DEFAULT_MODEL = "qwen2.5:1.5b-instruct"
PASSWORD = "0123456789abcdef"  # noqa: S105 - rendered into a config, never used
ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - what a container must listen on

Config = dict[str, Any]
Render = Callable[..., Config]


# --- running Compose -------------------------------------------------------------------------


@cache
def _compose_command() -> tuple[str, ...] | None:
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run(  # noqa: S603 - the docker client found on PATH, fixed arguments
            [docker, "compose", "version"], capture_output=True, check=False, timeout=30
        )
        if probe.returncode == 0:
            return (docker, "compose")
    standalone = shutil.which("docker-compose")
    return None if standalone is None else (standalone,)


@pytest.fixture(scope="module")
def compose() -> tuple[str, ...]:
    command = _compose_command()
    if command is None:
        reason = "no Compose: neither `docker compose` nor `docker-compose` on PATH"
        if os.environ.get("NUISANCES_TEST_REQUIRE_COMPOSE") == "1":
            pytest.fail(reason + " (NUISANCES_TEST_REQUIRE_COMPOSE=1)")
        pytest.skip(reason)
    return command


def _run_config(
    compose: tuple[str, ...],
    tmp: Path,
    *,
    files: tuple[Path, ...],
    profiles: tuple[str, ...],
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``config`` with only the variables given: the caller's shell and any .env stay out."""
    env_file = tmp / "test.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in (env or {}).items()), encoding="utf-8")
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NUISANCES_", "COMPOSE_", "POSTGRES_", "OLLAMA_"))
    }
    args = [*compose, "--project-directory", str(ROOT), "--env-file", str(env_file)]
    args += [arg for f in files for arg in ("-f", str(f))]
    args += [arg for p in profiles for arg in ("--profile", p)]
    return subprocess.run(  # noqa: S603 - Compose, our files, fixed arguments
        [*args, "config"],
        capture_output=True,
        text=True,
        check=False,
        env=clean,
        timeout=60,
        cwd=tmp,
    )


@pytest.fixture(scope="module")
def render(compose: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> Render:
    """``render(files=..., profiles=..., env=...)`` -> the normalised configuration."""
    tmp = tmp_path_factory.mktemp("compose")

    def _render(
        files: tuple[Path, ...] = (COMPOSE_FILE,),
        profiles: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> Config:
        result = _run_config(compose, tmp, files=files, profiles=profiles, env=env)
        assert result.returncode == 0, f"compose config failed:\n{result.stderr}"
        config = yaml.safe_load(result.stdout)
        assert isinstance(config, dict)
        return config

    return _render


@pytest.fixture(scope="module")
def default(render: Render) -> Config:
    config: Config = render()
    return config


@pytest.fixture(scope="module")
def everything(render: Render) -> Config:
    config: Config = render(profiles=("pull", "postgres"), env={"POSTGRES_PASSWORD": PASSWORD})
    return config


# --- reading the normalised configuration (v1 and v2 spell some fields differently) ----------


def _environment(service: Config) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def _mounts(service: Config) -> dict[str, tuple[str, bool]]:
    """Mount target -> (source, read-only), from short (``src:dst[:mode]``) or long form."""
    mounts: dict[str, tuple[str, bool]] = {}
    for item in service.get("volumes") or []:
        if isinstance(item, str):
            source, target, *mode = item.split(":")
            mounts[target] = (source, "ro" in ",".join(mode).split(","))
        else:
            source, target = str(item.get("source", "")), str(item["target"])
            mounts[target] = (source, bool(item.get("read_only", False)))
    return mounts


def _volumes(service: Config) -> dict[str, str]:
    """Mount target -> source."""
    return {target: source for target, (source, _) in _mounts(service).items()}


def _ports(service: Config) -> list[dict[str, str]]:
    ports = []
    for item in service.get("ports") or []:
        if isinstance(item, dict):
            ports.append({k: str(v) for k, v in item.items()})
        else:  # "[ip:]published:target"
            *ip, published, target = str(item).split(":")
            ports.append({"host_ip": ip[0] if ip else "", "published": published, "target": target})
    return ports


def _healthcheck(service: Config) -> str:
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return test
    return " ".join(str(part) for part in test if part not in ("CMD", "CMD-SHELL"))


def _depends(service: Config) -> dict[str, str]:
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return dict.fromkeys(raw, "service_started")
    return {name: str(spec.get("condition", "service_started")) for name, spec in raw.items()}


def _nginx(directive: str) -> list[str]:
    """The arguments of each ``directive`` in deploy/nginx/nginx.conf, comment lines dropped."""
    lines = NGINX_CONF.read_text(encoding="utf-8").splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    return [
        " ".join(args.split())
        for args in re.findall(rf"^\s*{directive}\s+([^;{{}}\n]*);", text, re.M)
    ]


def _project_version() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return str(data["project"]["version"])


# --- Compose ---------------------------------------------------------------------------------


def test_every_profile_renders(everything: Config) -> None:
    assert set(everything["services"]) == {"ollama", "ollama-pull", "api", "proxy", "postgres"}


def test_optional_services_sit_behind_profiles(everything: Config) -> None:
    """An offline `docker compose up -d` starts ollama, api and proxy only: nothing pulls."""
    services = everything["services"]
    assert services["ollama-pull"].get("profiles") == ["pull"]
    assert services["postgres"].get("profiles") == ["postgres"]
    assert not services["ollama"].get("profiles")
    assert not services["api"].get("profiles")
    assert not services["proxy"].get("profiles")


def test_api_waits_for_a_healthy_ollama(default: Config) -> None:
    assert _depends(default["services"]["api"]) == {"ollama": "service_healthy"}


def test_api_reaches_ollama_by_service_name_and_port(default: Config) -> None:
    services = default["services"]
    url = urlsplit(_environment(services["api"])["NUISANCES_PROVIDER__BASE_URL"])
    listen = _environment(services["ollama"])["OLLAMA_HOST"]
    assert (url.scheme, url.hostname) == ("http", "ollama")
    assert url.port == int(listen.rsplit(":", 1)[1])
    assert listen.startswith("0.0.0.0:"), "Ollama must listen beyond its own loopback"


def test_ollama_serves_one_generation_at_a_time(default: Config) -> None:
    ollama = _environment(default["services"]["ollama"])
    api = _environment(default["services"]["api"])
    assert ollama["OLLAMA_NUM_PARALLEL"] == "1"
    assert api["NUISANCES_PROVIDER__PARALLEL"] == ollama["OLLAMA_NUM_PARALLEL"]
    assert ollama["OLLAMA_KEEP_ALIVE"] == "-1", "a cold load costs tens of seconds on a CPU"
    assert 1 <= int(ollama["OLLAMA_MAX_QUEUE"]) <= 16, "a small queue: the api admits the rest"


def test_ollama_is_checked_and_not_exposed(default: Config) -> None:
    ollama = default["services"]["ollama"]
    assert _healthcheck(ollama) == "ollama list"
    assert ollama["restart"] == "unless-stopped"
    assert all(port.get("host_ip") == "127.0.0.1" for port in _ports(ollama))


def test_the_pull_job_fetches_the_api_model(everything: Config) -> None:
    services = everything["services"]
    pull, api = services["ollama-pull"], services["api"]
    assert pull["image"] == services["ollama"]["image"]
    assert pull["restart"] == "no"
    assert _depends(pull) == {"ollama": "service_healthy"}
    assert _environment(pull)["OLLAMA_HOST"] == "ollama:11434"
    assert list(pull["command"]) == ["pull", _environment(api)["NUISANCES_PROVIDER__MODEL"]]


def test_one_variable_chooses_the_model(render: Render) -> None:
    services = render(profiles=("pull",), env={"NUISANCES_MODEL": "llama3.2:1b"})["services"]
    assert _environment(services["api"])["NUISANCES_PROVIDER__MODEL"] == "llama3.2:1b"
    assert services["ollama-pull"]["command"][-1] == "llama3.2:1b"


def test_default_model(default: Config) -> None:
    api = default["services"]["api"]
    assert _environment(api)["NUISANCES_PROVIDER__MODEL"] == DEFAULT_MODEL


def test_only_the_proxy_is_published(everything: Config) -> None:
    """The api listens on the compose network only: the LAN reaches it through TLS."""
    services = everything["services"]
    assert _ports(services["api"]) == []
    assert [str(port) for port in services["api"]["expose"]] == ["8000"]
    proxy = _ports(services["proxy"])
    assert [(p["published"], p["target"]) for p in proxy] == [("8443", "8443")]
    assert all(p.get("host_ip", "") in ("", ANY_ADDRESS) for p in proxy), "phones reach it"
    for name, service in services.items():
        if name != "proxy":
            assert all(port.get("host_ip") == "127.0.0.1" for port in _ports(service)), name


def test_https_port_is_configurable(render: Render) -> None:
    services = render(env={"NUISANCES_HTTPS_PORT": "9443", "NUISANCES_API_PORT": "18080"})[
        "services"
    ]
    assert [(p["published"], p["target"]) for p in _ports(services["proxy"])] == [("9443", "8443")]
    assert _ports(services["api"]) == [], "the api's old port variable publishes nothing"


def test_every_image_is_pinned(everything: Config) -> None:
    for name, service in everything["services"].items():
        image = str(service["image"])
        repository, _, tag = image.rpartition(":")
        assert repository, f"{name}: {image} has no tag"
        assert "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest", f"{name}: {image} floats on latest"
    assert everything["services"]["api"]["image"] == f"nuisances-assistant:{_project_version()}"


def test_named_volumes_are_declared_and_mounted(everything: Config) -> None:
    services, declared = everything["services"], set(everything.get("volumes") or {})
    expected = {
        "ollama": "/root/.ollama",
        "api": "/app/data",
        "postgres": "/var/lib/postgresql/data",
    }
    for name, target in expected.items():
        assert _volumes(services[name]).get(target) in declared, f"{name}: {target}"
    for name, service in services.items():
        for target, (source, read_only) in _mounts(service).items():
            if name == "proxy":  # its configuration and certificates, from the checkout
                assert read_only, f"proxy: {target} is writable"
                assert Path(source).resolve().is_relative_to(ROOT / "deploy"), source
            else:
                assert source in declared, f"{name}: {target} is not a named volume ({source!r})"


def test_api_is_hardened(default: Config) -> None:
    api = default["services"]["api"]
    assert api["read_only"] is True
    assert "/tmp" in list(api.get("tmpfs") or [])  # noqa: S108 - a tmpfs in the container
    assert "no-new-privileges:true" in api["security_opt"]
    assert api["restart"] == "unless-stopped"
    check = _healthcheck(api)
    assert "http://127.0.0.1:8000/healthz" in check
    assert check.startswith("python "), "the slim image has no curl: Python's stdlib checks"


def test_proxy_mounts_its_config_and_certificates_read_only(default: Config) -> None:
    mounts = _mounts(default["services"]["proxy"])
    assert set(mounts) == {"/etc/nginx/nginx.conf", "/etc/nginx/tls"}
    assert mounts["/etc/nginx/nginx.conf"] == (str(NGINX_CONF), True)
    assert mounts["/etc/nginx/tls"] == (str(TLS_DIR), True)
    for directive in ("ssl_certificate", "ssl_certificate_key"):
        [path] = _nginx(directive)
        assert Path(path).parent == Path("/etc/nginx/tls"), f"{directive} {path}"
        assert Path(path).name in ("server.crt", "server.key")
    ignored = (TLS_DIR / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert {"*.key", "*.crt"} <= set(ignored), "keys and certificates stay out of git"


def test_proxy_is_hardened(default: Config) -> None:
    proxy = default["services"]["proxy"]
    assert proxy["read_only"] is True
    assert proxy["cap_drop"] == ["ALL"]
    assert not proxy.get("cap_add"), "it listens on 8443: no capability needed"
    assert "no-new-privileges:true" in proxy["security_opt"]
    assert proxy["restart"] == "unless-stopped"
    assert re.fullmatch(r"\d+:\d+", str(proxy["user"])), "a fixed numeric uid:gid"
    assert not str(proxy["user"]).startswith("0:"), "not root"
    assert _depends(proxy) == {"api": "service_healthy"}
    assert proxy["logging"] == default["services"]["api"]["logging"], "the shared *logging"
    assert re.fullmatch(r"nginx:\d+\.\d+\.\d+-alpine", proxy["image"]), proxy["image"]
    assert _healthcheck(proxy).startswith("curl "), "the nginx alpine image ships curl"


def test_proxy_user_is_configurable(render: Render) -> None:
    proxy = render(env={"NUISANCES_PROXY_USER": "1001:1002"})["services"]["proxy"]
    assert str(proxy["user"]) == "1001:1002"


def test_nginx_conf_matches_the_proxy_service(default: Config) -> None:
    """The port nginx listens on is the one published and checked; what nginx writes lies in a
    tmpfs (the container is read-only); its upstream is the api, as the api listens."""
    services = default["services"]
    proxy, api = services["proxy"], services["api"]
    [listen] = _nginx("listen")
    port = listen.split()[0]
    assert listen.split()[1:] == ["ssl"], "TLS only: nothing in clear"
    assert [p["target"] for p in _ports(proxy)] == [port]
    assert f"https://127.0.0.1:{port}/healthz" in _healthcheck(proxy)
    tmpfs = [str(path) for path in proxy.get("tmpfs") or []]
    written = _nginx("pid") + [
        path
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        for path in _nginx(f"{kind}_temp_path")
    ]
    assert len(written) == 6, written
    for path in written:
        assert any(Path(path).is_relative_to(mount) for mount in tmpfs), f"{path} not in {tmpfs}"
    [upstream] = _nginx("server")
    host, _, upstream_port = upstream.partition(":")
    assert host == "api"
    assert upstream_port in [str(p) for p in api["expose"]]
    assert _environment(api)["NUISANCES_LIMITS__FORWARDED_ALLOW_IPS"] == "*", (
        "the api believes the proxy's X-Forwarded-For: per-address limits see the phone"
    )


def test_api_is_built_from_this_dockerfile(default: Config) -> None:
    build = default["services"]["api"]["build"]
    assert Path(build["context"]).resolve() == ROOT
    assert (ROOT / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE


def test_postgres_is_checked(everything: Config) -> None:
    postgres = everything["services"]["postgres"]
    assert _healthcheck(postgres).startswith("pg_isready ")
    assert _environment(postgres)["POSTGRES_PASSWORD"] == PASSWORD


def test_postgres_override_points_the_api_at_it(render: Render) -> None:
    config = render(
        files=(COMPOSE_FILE, POSTGRES_OVERRIDE),
        profiles=("postgres",),
        env={"POSTGRES_PASSWORD": PASSWORD},
    )
    api, postgres = config["services"]["api"], config["services"]["postgres"]
    url = make_url(_environment(api)["NUISANCES_DATABASE_URL"])
    db = _environment(postgres)
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.database) == (
        db["POSTGRES_USER"],
        db["POSTGRES_PASSWORD"],
        db["POSTGRES_DB"],
    )
    assert _depends(api) == {"ollama": "service_healthy", "postgres": "service_healthy"}


def test_postgres_override_refuses_an_empty_password(
    compose: tuple[str, ...], tmp_path: Path
) -> None:
    result = _run_config(
        compose, tmp_path, files=(COMPOSE_FILE, POSTGRES_OVERRIDE), profiles=("postgres",)
    )
    assert result.returncode != 0
    assert "POSTGRES_PASSWORD" in result.stderr


# --- Settings: every NUISANCES_ variable the deployment sets is a real, valid setting ----------


def _setting_path(name: str) -> list[str]:
    """``NUISANCES_PROVIDER__BASE_URL`` -> ``["provider", "base_url"]``, or a failure."""
    assert name.startswith("NUISANCES_"), name
    parts = name.removeprefix("NUISANCES_").lower().split("__")
    model: type[BaseModel] = Settings
    for depth, part in enumerate(parts):
        assert part in model.model_fields, f"{name}: no setting {'.'.join(parts[: depth + 1])}"
        annotation = model.model_fields[part].annotation
        if depth < len(parts) - 1:
            assert isinstance(annotation, type), name
            assert issubclass(annotation, BaseModel), name
            model = annotation
    return parts


def _deployment_environment(config: Config) -> dict[str, str]:
    """The api container's NUISANCES_ variables: the Dockerfile's ENV, then compose's."""
    env = {k: v for k, v in _dockerfile_env().items() if k.startswith("NUISANCES_")}
    env.update(_environment(config["services"]["api"]))
    return env


@pytest.mark.parametrize("override", [False, True], ids=["sqlite", "postgres override"])
def test_deployment_variables_are_valid_settings(
    render: Render, override: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = (COMPOSE_FILE, POSTGRES_OVERRIDE) if override else (COMPOSE_FILE,)
    config = render(files=files, profiles=("postgres",), env={"POSTGRES_PASSWORD": PASSWORD})
    env = _deployment_environment(config)
    for name in env:
        _setting_path(name)
    for name in [k for k in os.environ if k.startswith("NUISANCES_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()  # the real loader: values validate too
    assert (settings.host, settings.port) == (ANY_ADDRESS, 8000)
    assert settings.provider.base_url.host == "ollama"
    database = make_url(settings.database_url)
    if not override:
        assert database.drivername == "sqlite"
        assert str(database.database).startswith("/app/data/"), "SQLite lives in the volume"


# --- Dockerfile ------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in _final_stage():
        if keyword == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", rest)))
    return env


def test_dockerfile_is_multi_stage_on_a_pinned_slim_python() -> None:
    images = [rest.split()[0] for keyword, rest in _instructions() if keyword == "FROM"]
    assert len(images) >= 2, "a build stage and a runtime stage"
    for image in images:
        assert re.fullmatch(r"python:3\.11-slim(-[a-z]+)?", image), image


def test_dockerfile_runs_as_a_fixed_non_root_user() -> None:
    users = [rest for keyword, rest in _final_stage() if keyword == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0", ""), users[-1]
    assert user.isdigit(), "a fixed numeric uid (volumes and runAsNonRoot rely on it)"


def test_dockerfile_serves_on_8000_with_a_healthcheck() -> None:
    stage = _final_stage()
    keywords = dict(stage)
    assert "8000" in keywords["EXPOSE"].split()
    assert "/healthz" in keywords["HEALTHCHECK"]
    assert "curl" not in keywords["HEALTHCHECK"]
    assert "wget" not in keywords["HEALTHCHECK"]
    assert json.loads(keywords["CMD"]) == ["nuisances", "serve"]
    assert json.loads(keywords["VOLUME"]) == ["/app/data"]
    assert keywords["WORKDIR"] == "/app"
    env = _dockerfile_env()
    assert env["NUISANCES_HOST"] == ANY_ADDRESS
    assert env["NUISANCES_PORT"] == "8000"
    assert env["NUISANCES_DATABASE_URL"] == "sqlite:////app/data/nuisances.db"


def test_dockerfile_installs_no_dev_extra() -> None:
    runs = " ".join(rest for keyword, rest in _instructions() if keyword == "RUN")
    assert "[dev]" not in runs


def test_build_context_holds_every_wheel_package() -> None:
    """The Dockerfile copies, and .dockerignore lets through, each package of the wheel."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied: set[str] = set()
    for keyword, rest in _instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            copied.update(source.rstrip("/") for source in rest.split()[:-1])
    allowed = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for needed in ["pyproject.toml", "README.md", *packages]:
        assert needed in copied, f"Dockerfile: no COPY of {needed}"
        assert f"!{needed}" in allowed or f"!{needed}/" in allowed, f".dockerignore: {needed}"


def test_modelfile_builds_from_a_local_gguf_without_a_system_prompt() -> None:
    lines = (ROOT / "deploy" / "Modelfile").read_text(encoding="utf-8").splitlines()
    directives = [line.split()[0].upper() for line in lines if line and not line.startswith("#")]
    assert any(re.fullmatch(r"FROM \./\S+\.gguf", line) for line in lines)
    assert "SYSTEM" not in directives, "the api sends its own French system prompt"
