"""``nuisances directory list|import|export|card``: the contacts from the command line.

The database is ``NUISANCES_DATABASE_URL`` (default ``sqlite:///data/nuisances.db``).
``list`` and ``card`` read it through the same store as the server, so they still answer
(national contacts only, with a warning) when it is unreachable.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from directory.contact import CATEGORIES, TOPICS, Contact, is_departement
from directory.io import ContactFileError, dump_contacts, read_contacts_file
from directory.models import load_local_contacts, upsert_contacts
from directory.national import national_contacts, national_ids
from directory.snapshot import Directory, DirectoryStore
from server.db.migrate import upgrade

app = typer.Typer(help="Contacts and their numbers: list, import, export, show a card.")
console = Console(highlight=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True)

DATABASE_URL_VARIABLE = "NUISANCES_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///data/nuisances.db"


def database_url() -> str:
    """The database URL from the environment; creates the directory of a SQLite file."""
    url = os.environ.get(DATABASE_URL_VARIABLE) or DEFAULT_DATABASE_URL
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    return url


@contextmanager
def _engine() -> Iterator[Engine]:
    try:
        engine = create_engine(database_url())
    except (ArgumentError, ImportError, OSError) as exc:
        raise _fail(f"bad {DATABASE_URL_VARIABLE}: {exc}") from exc
    try:
        yield engine
    finally:
        engine.dispose()


def _snapshot() -> Directory:
    """The directory as the server would see it; national-only if the database fails."""
    store = DirectoryStore()
    try:
        with _engine() as engine:
            with suppress(SQLAlchemyError):  # reload below warns and keeps the national data
                upgrade(engine.url.render_as_string(hide_password=False))
            loaded = store.reload(sessionmaker(engine))
    except typer.Exit:
        loaded = False
    if not loaded:
        errors.print("warning: database unreadable, national contacts only", style="yellow")
    return store.snapshot


def _region(region: str | None) -> str | None:
    if region is not None and not is_departement(region):
        raise typer.BadParameter(
            f"{region!r}: expected a département code (01–19, 21–95, 2A, 2B, 971–976)",
            param_hint="--region",
        )
    return region


def _fail(message: str) -> typer.Exit:
    errors.print(message, style="red", markup=False)
    return typer.Exit(code=1)


@app.command(name="list")
def list_contacts(
    region: Annotated[
        str | None, typer.Option(help="Only national contacts and those of this département.")
    ] = None,
) -> None:
    """Show the contacts in a table."""
    region = _region(region)
    snapshot = _snapshot()
    table = Table()
    table.add_column("id", overflow="fold")
    table.add_column("name")
    table.add_column("number", no_wrap=True)
    table.add_column("kind")
    table.add_column("region")
    table.add_column("categories")
    for contact in snapshot.contacts:
        if region is None or contact.region in (None, region):
            table.add_row(
                contact.id,
                contact.name,
                contact.number,
                contact.kind,
                contact.region or "national",
                ", ".join(contact.categories) or "-",
            )
    console.print(table)


@app.command(name="import")
def import_contacts(
    file: Annotated[Path, typer.Argument(dir_okay=False, help="YAML list of local contacts.")],
) -> None:
    """Add or update local contacts from a file, validated whole first; prints what changed."""
    try:
        contacts = read_contacts_file(file, scope="local", reserved_ids=national_ids())
    except ContactFileError as exc:
        errors.print(f"refused, nothing imported: {exc}", style="red", markup=False)
        raise typer.Exit(code=2) from exc
    try:
        with _engine() as engine:
            upgrade(engine.url.render_as_string(hide_password=False))
            with sessionmaker(engine).begin() as session:
                report = upsert_contacts(session, contacts)
    except SQLAlchemyError as exc:
        raise _fail(f"database error, nothing imported: {exc}") from exc
    for label, ids in (
        ("added", report.added),
        ("updated", report.updated),
        ("unchanged", report.unchanged),
    ):
        console.print(f"{label} ({len(ids)}): {', '.join(ids) or '-'}", markup=False)


@app.command(name="export")
def export_contacts(
    include_all: Annotated[
        bool, typer.Option("--all", help="Include the national contacts.")
    ] = False,
) -> None:
    """Print the local contacts (all with --all) as YAML that imports back identically."""
    try:
        with _engine() as engine:
            upgrade(engine.url.render_as_string(hide_password=False))
            with sessionmaker(engine)() as session:
                local = load_local_contacts(session)
    except SQLAlchemyError as exc:
        raise _fail(f"database error: {exc}") from exc
    contacts: list[Contact] = [*national_contacts(), *local] if include_all else local
    typer.echo(dump_contacts(contacts), nl=False)


def _check(values: list[str], allowed: tuple[str, ...], what: str) -> None:
    for value in values:
        if value not in allowed:
            raise typer.BadParameter(
                f"{value!r}: expected one of {', '.join(allowed)}", param_hint=what
            )


@app.command()
def card(
    category: Annotated[str, typer.Argument(help="danger, detresse, represailles or rien.")],
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="A topic that fired (repeatable).")
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="Département code, for local contacts.")
    ] = None,
) -> None:
    """Show the card for a category, in order, with the numbers."""
    topics = topic or []
    _check([category], (*CATEGORIES, "rien"), "CATEGORY")
    _check(topics, TOPICS, "--topic")
    region = _region(region)
    snapshot = _snapshot()
    contacts = snapshot.card_for([category], topics, region)
    if not contacts:
        console.print(f"no card for {category!r}", markup=False)
        return
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("name")
    table.add_column("number", no_wrap=True)
    table.add_column("hours")
    table.add_column("id", overflow="fold")
    for rank, contact in enumerate(contacts, start=1):
        table.add_row(str(rank), contact.name, contact.number, contact.hours, contact.id)
    console.print(table)
