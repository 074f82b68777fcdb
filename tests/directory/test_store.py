"""``DirectoryStore``: reloads from the database, and keeps a card when it cannot."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

from directory.io import parse_contacts
from directory.models import upsert_contacts
from directory.national import national_contacts
from directory.snapshot import Directory, DirectoryStore
from server.db.migrate import upgrade
from tests.directory.helpers import LOCAL_FILE

LOCAL = parse_contacts(LOCAL_FILE, "local.yaml")
NATIONAL_THREATS_CARD = ["17", "116 006", "112"]


@contextmanager
def _sessions(url: str) -> Iterator[sessionmaker[Session]]:
    engine = create_engine(url)
    upgrade(engine.url.render_as_string(hide_password=False))
    try:
        yield sessionmaker(engine)
    finally:
        engine.dispose()


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    with _sessions(database_url) as factory:
        yield factory


def test_reload_after_an_upsert_changes_the_snapshot(sessions: sessionmaker[Session]) -> None:
    store = DirectoryStore()
    assert store.reload(sessions)
    first = store.snapshot
    assert first.local_contacts == ()
    with sessions.begin() as session:
        upsert_contacts(session, LOCAL)
    assert store.reload(sessions)
    assert store.snapshot is not first
    assert first.local_contacts == ()  # a snapshot never changes; the store swaps it
    card = store.snapshot.card_for(["represailles"], ["menace"], "69")
    assert [c.id for c in card][-1] == "mairie-lyon"


def test_refresh_reloads_only_when_the_fingerprint_moves(sessions: sessionmaker[Session]) -> None:
    store = DirectoryStore()
    assert store.refresh(sessions)  # never loaded: loads
    snapshot = store.snapshot
    assert not store.refresh(sessions)
    assert store.snapshot is snapshot
    with sessions.begin() as session:
        upsert_contacts(session, LOCAL[:1])
    assert store.refresh(sessions)
    assert store.snapshot.get(LOCAL[0].id) == LOCAL[0]


DEAD_URLS = [
    pytest.param("postgresql+psycopg://nobody@127.0.0.1:1/none", id="nothing listens"),
    pytest.param("sqlite:////nonexistent-directory/x/contacts.db", id="unreachable file"),
]


@pytest.mark.parametrize("url", DEAD_URLS)
def test_a_dead_database_keeps_the_national_card(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = DirectoryStore()
    with caplog.at_level(logging.WARNING, logger="directory.snapshot"):
        assert not store.reload(sessionmaker(create_engine(url)))
        assert not store.refresh(sessionmaker(create_engine(url)))
    card = store.snapshot.card_for(["represailles"], ["menace"], "69")
    assert [c.number for c in card] == NATIONAL_THREATS_CARD
    assert len(store.snapshot.contacts) == len(national_contacts())
    assert caplog.text.count("cannot read the database") == 1  # warned once, not every poll


def test_a_dead_database_keeps_the_last_good_snapshot(tmp_path: Path) -> None:
    store = DirectoryStore()
    with _sessions(f"sqlite:///{tmp_path / 'contacts.db'}") as sessions:
        with sessions.begin() as session:
            upsert_contacts(session, LOCAL)
        assert store.reload(sessions)
    good = store.snapshot
    dead = sessionmaker(create_engine("sqlite:////nonexistent-directory/contacts.db"))
    assert not store.reload(dead)
    assert store.snapshot is good
    assert len(good.local_contacts) == len(LOCAL)


def test_a_table_not_yet_created_keeps_the_national_card(tmp_path: Path) -> None:
    store = DirectoryStore()
    assert not store.reload(sessionmaker(create_engine(f"sqlite:///{tmp_path / 'empty.db'}")))
    assert store.snapshot.card_for(["danger"], ["gaz"])[0].id == "pompiers"


def test_watch_picks_up_an_upsert(sessions: sessionmaker[Session]) -> None:
    store = DirectoryStore(Directory.national_only())

    async def until(contact_id: str) -> None:
        for _ in range(2000):  # bounded: a broken watch fails the test, it does not hang it
            if store.snapshot.get(contact_id) is not None:
                return
            await asyncio.sleep(0.005)
        pytest.fail(f"the store never saw {contact_id!r}")

    async def scenario() -> None:
        watcher = asyncio.create_task(store.watch(sessions, interval_s=0.01))
        try:
            with sessions.begin() as session:
                upsert_contacts(session, LOCAL[:1])
            await until(LOCAL[0].id)
            with sessions.begin() as session:
                upsert_contacts(session, LOCAL[1:])
            await until(LOCAL[2].id)
        finally:
            watcher.cancel()
            with pytest.raises(asyncio.CancelledError):
                await watcher

    asyncio.run(scenario())
