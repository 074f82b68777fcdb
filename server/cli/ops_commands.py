"""``nuisances serve``, ``tokens create|list|revoke``, ``db upgrade|purge``."""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.console import Console
from sqlalchemy.orm import Session, sessionmaker

from llm.audit import AuditLog
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.settings import Settings, SettingsError, load_settings

console = Console(highlight=False, soft_wrap=True)
tokens_app = typer.Typer(help="Per-device bearer tokens (stored hashed).", no_args_is_help=True)
db_app = typer.Typer(help="The database: migrations and retention.", no_args_is_help=True)


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc


def _sessions(settings: Settings) -> sessionmaker[Session]:
    upgrade(settings.database_url)
    return make_session_factory(make_engine(settings.database_url))


@tokens_app.command("create")
def tokens_create(label: Annotated[str, typer.Option(help="Who or what the device is.")]) -> None:
    """Create a device token; it is shown once, keep it."""
    with _sessions(_settings())() as session:
        device, token = repository.create_device(session, label)
    console.print(f"device {device.id} ({label})")
    console.print(token, markup=False)


@tokens_app.command("list")
def tokens_list() -> None:
    with _sessions(_settings())() as session:
        devices = repository.list_devices(session)
    for d in devices:
        revoked = f"revoked {d.revoked_at:%Y-%m-%d %H:%M}" if d.revoked_at else "active"
        console.print(
            f"{d.id}  {d.token_prefix}…  {d.created_at:%Y-%m-%d %H:%M}  {revoked}  {d.label}",
            markup=False,
        )


@tokens_app.command("revoke")
def tokens_revoke(
    device: Annotated[str, typer.Argument(help="Device id or token prefix.")],
) -> None:
    with _sessions(_settings())() as session:
        found = repository.revoke_device(session, device)
    if found is None:
        console.print(f"no device {device!r}", style="red", markup=False)
        raise typer.Exit(1)
    console.print(f"revoked {found.id} ({found.label})")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the migrations (also done at every start of the service)."""
    settings = _settings()
    upgrade(settings.database_url)
    console.print("database up to date")


def _age(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)\s*([dhm])", text.strip())
    if match is None:
        raise typer.BadParameter("an age like 30d, 12h or 45m")
    value, unit = int(match.group(1)), match.group(2)
    return {"d": timedelta(days=value), "h": timedelta(hours=value), "m": timedelta(minutes=value)}[
        unit
    ]


@db_app.command("purge")
def db_purge(
    older_than: Annotated[str, typer.Option("--older-than", help="e.g. 30d, 12h.")] = "30d",
) -> None:
    """Delete turns, cached answers and audit lines older than the given age, and
    conversations left empty (the retention: run it daily, e.g. from cron)."""
    age = _age(older_than)
    settings = _settings()
    with _sessions(settings)() as session:
        turns, conversations = repository.purge_older_than(session, age)
        repository.compact(session)
    audit = AuditLog(settings.audit_path, settings.audit_max_bytes, settings.audit_backups)
    try:
        lines = audit.purge(datetime.now(UTC) - age)
    finally:
        audit.close()
    console.print(
        f"deleted {turns} turns, {conversations} conversations and {lines} audit lines "
        f"older than {older_than}"
    )


def serve(
    host: Annotated[str | None, typer.Option(help="Overrides NUISANCES_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Overrides NUISANCES_PORT.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="API processes (overrides NUISANCES_WORKERS); more than 1 needs PostgreSQL."
        ),
    ] = None,
) -> None:
    """Run the API (migrations first; with no device yet, create one and print its token)."""
    import uvicorn

    from server.logs import configure_logging
    from server.main import create_app
    from server.serving import uvicorn_options

    overrides: dict[str, object] = {}
    for name, value in (("host", host), ("port", port), ("workers", workers)):
        if value is not None:
            overrides[name] = value
    try:
        settings = load_settings(**overrides)
    except SettingsError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    if settings.workers > 1 and not settings.database_url.startswith("postgresql"):
        console.print(
            "several workers share their state (slots, quotas, idempotency) through "
            "PostgreSQL: set NUISANCES_DATABASE_URL=postgresql+psycopg://... or run one worker",
            style="red",
            markup=False,
        )
        raise typer.Exit(2)
    upgrade(settings.database_url)
    if settings.create_first_token:
        with make_session_factory(make_engine(settings.database_url))() as session:
            if not repository.list_devices(session):
                _, token = repository.create_device(session, "first device")
                console.print("No device yet: created one. Its bearer token (shown once):")
                console.print(token, markup=False)
    configure_logging(settings.log_level, settings.limits.log_interval_s)
    console.print(
        f"serving on http://{settings.host}:{settings.port} with {settings.workers} "
        f"worker(s) (model: {settings.provider.type} {settings.provider.model} at "
        f"{', '.join(str(e.base_url) for e in settings.provider.endpoints())}); docs at /docs"
    )
    if settings.workers == 1:
        uvicorn.run(
            create_app(settings, migrate=False, freeze_gc=True),
            host=settings.host,
            port=settings.port,
            **uvicorn_options(settings),
        )
        return
    # Workers are new processes: they read the settings from the environment, as this one
    # did (NUISANCES_CONFIG and NUISANCES_* are inherited); only the options given on the
    # command line are passed on. Metrics go through files shared by all of them.
    os.environ["NUISANCES_WORKERS"] = str(settings.workers)
    folder = settings.data_dir / "metrics"
    shutil.rmtree(folder, ignore_errors=True)  # values of a previous run must not add up
    folder.mkdir(parents=True, mode=0o700)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder.resolve())
    uvicorn.run(
        "server.main:app_for_workers",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        # A worker loads the detector's rules and weights before it answers the supervisor's
        # pings: at 5 s (uvicorn's default) two workers starting on two cores get killed.
        timeout_worker_healthcheck=60,
        **uvicorn_options(settings),
    )
