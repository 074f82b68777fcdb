"""The ``local_contacts`` table, on SQLite and on PostgreSQL (``database_url`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, select, update
from sqlalchemy.orm import Session, sessionmaker

from directory.contact import Contact
from directory.io import ContactFileError, dump_contacts, parse_contacts, read_contacts_file
from directory.models import (
    ImportReport,
    LocalContactRow,
    fingerprint,
    load_local_contacts,
    upsert_contacts,
)
from directory.national import national_contacts, national_ids
from server.db.migrate import upgrade
from tests.directory.helpers import LOCAL_FILE, local

LOCAL = parse_contacts(LOCAL_FILE, "local.yaml")
IDS = tuple(c.id for c in LOCAL)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url)
    upgrade(engine.url.render_as_string(hide_password=False))
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine)


def upsert(sessions: sessionmaker[Session], contacts: list[Contact]) -> ImportReport:
    with sessions.begin() as session:
        return upsert_contacts(session, contacts)


def loaded(sessions: sessionmaker[Session]) -> list[Contact]:
    with sessions() as session:
        return load_local_contacts(session)


def stamp(sessions: sessionmaker[Session]) -> str:
    with sessions() as session:
        return fingerprint(session)


def test_upsert_then_load(sessions: sessionmaker[Session]) -> None:
    assert upsert(sessions, LOCAL) == ImportReport(added=IDS)
    # Loaded by region then id: "2A" sorts before "69".
    assert loaded(sessions) == sorted(LOCAL, key=lambda c: (c.region, c.id))


def test_second_import_is_all_unchanged(sessions: sessionmaker[Session]) -> None:
    upsert(sessions, LOCAL)
    before = stamp(sessions)
    report = upsert(sessions, LOCAL)
    assert report == ImportReport(unchanged=IDS)
    assert not report.changed
    assert stamp(sessions) == before


def test_update_touches_only_what_changed(sessions: sessionmaker[Session]) -> None:
    upsert(sessions, LOCAL)
    changed = LOCAL[1].model_copy(update={"hours": "du lundi au samedi"})
    extra = local(id="mediateur-lyon", name="Médiateur de Lyon", aliases=[])
    report = upsert(sessions, [changed, extra])
    assert report == ImportReport(added=("mediateur-lyon",), updated=(changed.id,))
    by_id = {c.id: c for c in loaded(sessions)}
    assert by_id[changed.id].hours == "du lundi au samedi"
    assert set(by_id) == {*IDS, "mediateur-lyon"}  # rows absent from the input stay


def test_fingerprint_moves_with_every_change(sessions: sessionmaker[Session]) -> None:
    seen = {stamp(sessions)}
    upsert(sessions, LOCAL[:1])
    seen.add(stamp(sessions))
    upsert(sessions, LOCAL)
    seen.add(stamp(sessions))
    upsert(sessions, [LOCAL[0].model_copy(update={"name": "Mairie centrale"})])
    seen.add(stamp(sessions))
    with sessions.begin() as session:
        session.delete(session.get_one(LocalContactRow, LOCAL[2].id))
    seen.add(stamp(sessions))
    assert len(seen) == 5


@pytest.mark.parametrize(
    ("contact", "reason"),
    [
        pytest.param(national_contacts()[0], "needs a region", id="a national contact"),
        pytest.param(
            local(id="pompiers", name="Pompiers de Lyon"), "belongs to a national", id="its id"
        ),
    ],
)
def test_national_contacts_are_not_stored(
    sessions: sessionmaker[Session], contact: Contact, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        upsert(sessions, [LOCAL[0], contact])
    assert loaded(sessions) == []


def test_a_row_that_no_longer_validates_is_skipped(
    sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    upsert(sessions, LOCAL)
    with sessions.begin() as session:
        session.execute(
            update(LocalContactRow).where(LocalContactRow.id == IDS[0]).values(number="12-34")
        )
    assert [c.id for c in loaded(sessions)] == ["police-municipale-ajaccio", "antipoison-lyon"]
    assert IDS[0] in caplog.text


def test_import_export_round_trip(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    source = tmp_path / "local.yaml"
    source.write_text(LOCAL_FILE, encoding="utf-8")
    upsert(sessions, read_contacts_file(source, reserved_ids=national_ids()))
    exported = tmp_path / "export.yaml"
    exported.write_text(dump_contacts(loaded(sessions)), encoding="utf-8")
    again = read_contacts_file(exported, reserved_ids=national_ids())
    assert sorted(again, key=lambda c: c.id) == sorted(LOCAL, key=lambda c: c.id)
    assert upsert(sessions, again) == ImportReport(unchanged=tuple(c.id for c in again))


def test_an_invalid_file_changes_nothing(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    upsert(sessions, LOCAL[:1])
    before = (stamp(sessions), loaded(sessions))
    # Two good contacts (one an update), then a bad département on line 24.
    bad = LOCAL_FILE.replace("Mairie de Lyon", "Mairie de Lyon (accueil)").replace("2A", "20")
    path = tmp_path / "bad.yaml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(ContactFileError, match=r"bad\.yaml:24:.*bad département"):
        upsert(sessions, read_contacts_file(path, reserved_ids=national_ids()))
    assert (stamp(sessions), loaded(sessions)) == before


def test_schema_is_idempotent(engine: Engine) -> None:
    upgrade(engine.url.render_as_string(hide_password=False))
    with Session(engine) as session:
        assert session.scalars(select(LocalContactRow)).all() == []
