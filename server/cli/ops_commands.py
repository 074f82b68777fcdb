"""``nuisances serve``, ``tokens create|list|revoke``, ``db upgrade|purge``."""

from __future__ import annotations

import re
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
) -> None:
    """Run the API (migrations first; with no device yet, create one and print its token)."""
    import uvicorn

    from server.logs import configure_logging
    from server.main import create_app

    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    try:
        settings = load_settings(**overrides)
    except SettingsError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    upgrade(settings.database_url)
    if settings.create_first_token:
        with make_session_factory(make_engine(settings.database_url))() as session:
            if not repository.list_devices(session):
                _, token = repository.create_device(session, "first device")
                console.print("No device yet: created one. Its bearer token (shown once):")
                console.print(token, markup=False)
    configure_logging(settings.log_level)
    console.print(
        f"serving on http://{settings.host}:{settings.port} (model: {settings.provider.type} "
        f"{settings.provider.model} at {settings.provider.base_url}); docs at /docs"
    )
    uvicorn.run(
        create_app(settings, migrate=False, freeze_gc=True),
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=5,
    )
