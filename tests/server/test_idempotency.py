"""Idempotency that cannot lie: the key is (device, conversation, client_message_id), the
message is compared, and every path shows the card of the message actually received.

Against SQLite and PostgreSQL, through HTTP (in-process ASGI) with the fake Ollama. An outage
is the service's sessions pointed at a database that does not answer; the fault run
(``scripts/fault_run.py``) stops the real PostgreSQL.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.db import repository
from server.db.models import Turn, utcnow
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import Settings
from tests.fakes import Behaviour, FakeOllama, unused_port_url
from tests.server.conftest import async_client, auth, chat_body, sse_events

CALM = "le chien du voisin aboie tous les soirs"
GAS = "au secours ça sent le gaz partout et mon fils ne se réveille pas"


def _post(client: TestClient, token: str, body: dict[str, Any]) -> Any:
    return client.post("/v1/chat", json=body, headers=auth(token))


def _stream(client: TestClient, token: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    headers = {**auth(token), "Accept": "text/event-stream"}
    with client.stream("POST", "/v1/chat", json=body, headers=headers) as response:
        return sse_events(response.read().decode())


def _dead_database(client: TestClient) -> Any:
    """Point the service at a database that refuses connections; returns the live one."""
    services = client.app.state.services  # type: ignore[attr-defined]
    live = services.sessions
    dead = make_engine(unused_port_url().replace("http://", "postgresql+psycopg://u@") + "/none")
    services.sessions = make_session_factory(dead)
    return live


def _claim(session: Session, key: repository.TurnKey, lease: timedelta) -> repository.TurnClaim:
    """A process claims a calm turn and holds it for ``lease`` (negative: already lapsed)."""
    return repository.claim_turn(
        session, key=key, message=CALM, category="rien", rules=[], topics=[], region=None,
        lease=lease,
    )  # fmt: skip


def _turns(settings: Settings) -> list[Turn]:
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            return list(session.scalars(select(Turn).order_by(Turn.id)))
    finally:
        engine.dispose()


def test_same_id_other_message_is_a_conflict_that_still_shows_the_new_card(
    client: TestClient, token: str
) -> None:
    first = _post(client, token, chat_body(CALM, "m1"))
    assert first.status_code == 200
    assert first.json()["safety"]["category"] == "rien"
    refused = _post(client, token, chat_body(GAS, "m1"))
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "idempotency_conflict"
    assert "client_message_id" in error["message_fr"]
    assert "another message" in error["message_en"]
    assert error["safety"]["category"] == "danger"
    assert {"pompiers", "grdf"} <= {c["id"] for c in error["safety"]["card"]}
    assert error["safety"]["steps"]
    # The stored turn is the first one, untouched.
    assert [t.message for t in _turns(client.app.state.services.settings)] == [CALM]  # type: ignore[attr-defined]


def test_a_conflict_in_a_stream_ends_with_an_error_event_after_the_new_card(
    client: TestClient, token: str
) -> None:
    assert _post(client, token, chat_body(CALM, "m-sse")).status_code == 200
    events = _stream(client, token, chat_body(GAS, "m-sse"))
    assert [kind for kind, _ in events] == ["safety", "error"]
    assert events[0][1]["category"] == "danger"
    assert events[1][1]["error"]["code"] == "idempotency_conflict"
    assert events[1][1]["error"]["safety"] == events[0][1]


def test_same_id_in_another_conversation_is_another_turn(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Notez les horaires dans le journal."))
    fake_ollama.enqueue(Behaviour.normal("Sortez et appelez [[pompiers]]."))
    first = _post(client, token, chat_body(CALM, "m1", "conv-a")).json()
    other = _post(client, token, chat_body(GAS, "m1", "conv-b")).json()
    assert first["replayed"] is False
    assert other["replayed"] is False
    assert other["safety"]["category"] == "danger"
    assert other["text"] != first["text"]
    assert other["turn_id"] != first["turn_id"]


def test_same_id_same_message_replays_with_the_card_of_the_message_received(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Sortez et appelez [[pompiers]]."))
    before = len(fake_ollama.requests)
    first = _post(client, token, chat_body(GAS, "m-gas")).json()
    # The same message, as a client would resend it (white space is not a new message).
    again = _post(client, token, chat_body(f"  {GAS.replace(' ', '  ')}\n", "m-gas")).json()
    assert again["replayed"] is True
    assert again["text"] == first["text"]
    assert again["safety"] == first["safety"]
    assert again["safety"]["category"] == "danger"
    assert len(fake_ollama.requests) == before + 1
    streamed = _stream(client, token, chat_body(GAS, "m-gas"))
    assert next(kind for kind, _ in streamed) == "safety"
    assert streamed[-1][0] == "done"
    assert streamed[-1][1]["safety"] == streamed[0][1]  # done never says another category


@pytest.mark.anyio
async def test_concurrent_duplicates_generate_once_and_a_different_message_is_refused(
    settings: Settings, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(
        Behaviour.normal("Une réponse lente, mot après mot.", chunk_size=3, delay=0.05)
    )
    before = len(fake_ollama.requests)
    async with async_client(create_app(settings)) as http:
        same = chat_body(CALM, "m-race")
        other = chat_body(GAS, "m-race")
        answers = await asyncio.gather(
            *(http.post("/v1/chat", json=same, headers=auth(token)) for _ in range(3)),
            http.post("/v1/chat", json=other, headers=auth(token)),
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 200, 200, 409]
    ok = [a.json() for a in answers if a.status_code == 200]
    assert {a["text"] for a in ok} == {"Une réponse lente, mot après mot."}
    assert sorted(a["replayed"] for a in ok) == [False, True, True]
    refused = next(a.json() for a in answers if a.status_code == 409)
    assert refused["error"]["safety"]["category"] == "danger"
    assert len(fake_ollama.requests) == before + 1


def test_a_retry_after_a_crash_takes_the_abandoned_turn_over(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    with services.sessions() as session:  # a process claimed it, then died
        device = repository.device_by_token(session, token)
        assert device is not None
        key = repository.TurnKey(device.id, "c1", "m-crash")
        claim = _claim(session, key, timedelta(seconds=-1))
    assert claim.claimed
    fake_ollama.enqueue(Behaviour.normal("Notez les horaires dans le journal."))
    answer = _post(client, token, chat_body(CALM, "m-crash")).json()
    assert answer["replayed"] is False
    assert answer["source"] == "llm"
    assert answer["turn_id"] == claim.turn_id
    states = {t.client_message_id: t.state for t in _turns(services.settings)}
    assert states["m-crash"] == "done"


def test_start_up_marks_turns_left_running_failed(settings: Settings, token: str) -> None:
    engine = make_engine(settings.database_url)
    with make_session_factory(engine)() as session:
        device = repository.device_by_token(session, token)
        assert device is not None
        expired = _claim(
            session, repository.TurnKey(device.id, "c1", "m-old"), timedelta(seconds=-5)
        )
        alive = _claim(
            session, repository.TurnKey(device.id, "c1", "m-alive"), timedelta(minutes=5)
        )
    engine.dispose()
    with TestClient(create_app(settings)):
        states = {t.id: t.state for t in _turns(settings)}
    assert states[expired.turn_id] == "failed"
    assert states[alive.turn_id] == "running"  # still leased: its process may be alive


def test_an_outage_keeps_idempotency_in_memory_and_the_spool_stores_the_turn_once(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    assert _post(client, token, chat_body("bonjour", "m-before")).status_code == 200
    live = _dead_database(client)
    fake_ollama.enqueue(Behaviour.normal("Notez les horaires dans le journal."))
    before = len(fake_ollama.requests)
    during = _post(client, token, chat_body(CALM, "m-outage")).json()
    assert during["source"] == "llm"  # the model is still called
    assert during["turn_id"] is None
    retry = _post(client, token, chat_body(CALM, "m-outage")).json()
    assert retry["replayed"] is True
    assert retry["text"] == during["text"]
    conflict = _post(client, token, chat_body(GAS, "m-outage"))
    assert conflict.status_code == 409
    assert conflict.json()["error"]["safety"]["category"] == "danger"
    assert len(fake_ollama.requests) == before + 1
    assert services.spool.size() > 0
    services.sessions = live
    asyncio.run(services.maintain())  # what the background task does every few seconds
    assert services.spool.size() == 0
    asyncio.run(services.maintain())  # replaying twice stores nothing twice
    stored = [t for t in _turns(services.settings) if t.client_message_id == "m-outage"]
    assert len(stored) == 1
    assert stored[0].state == "done"
    assert stored[0].reply == during["text"]
    after = _post(client, token, chat_body(CALM, "m-outage")).json()
    assert after["replayed"] is True
    assert after["text"] == during["text"]
    assert after["turn_id"] == stored[0].id
    assert len(fake_ollama.requests) == before + 1


@pytest.mark.anyio
async def test_a_turn_whose_storage_fails_midway_is_spooled_and_finished(
    settings: Settings, token: str, fake_ollama: FakeOllama
) -> None:
    """Claimed while the database answered, finished after it went away: not left running."""
    fake_ollama.enqueue(Behaviour.normal("Une réponse.", chunk_size=2, delay=0.05))
    app = create_app(settings)
    async with async_client(app) as http:
        services = app.state.services
        live = services.sessions
        task = asyncio.create_task(
            http.post("/v1/chat", json=chat_body(CALM, "m-midway"), headers=auth(token))
        )
        while not any(f.turn_id for f in services.in_flight.values()):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        dead = make_engine(unused_port_url().replace("http://", "postgresql+psycopg://u@") + "/x")
        services.sessions = make_session_factory(dead)
        answer = (await task).json()
        assert services.spool.size() > 0
        services.sessions = live
        await services.maintain()
        assert services.spool.size() == 0
    assert answer["status"] == "ok"
    assert answer["turn_id"] is not None
    stored = [t for t in _turns(settings) if t.client_message_id == "m-midway"]
    assert [(t.id, t.state, t.reply) for t in stored] == [
        (answer["turn_id"], "done", "Une réponse.")
    ]


def test_turn_ids_are_never_given_again_after_an_erasure(client: TestClient, token: str) -> None:
    last = _post(client, token, chat_body(CALM, "m-a", "conv-x")).json()["turn_id"]
    assert client.delete("/v1/conversations/conv-x", headers=auth(token)).status_code == 204
    new = _post(client, token, chat_body(CALM, "m-a", "conv-x")).json()
    assert new["replayed"] is False
    assert new["turn_id"] > last


def test_quota_counts_admissions_and_erasing_gives_nothing_back(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    from server.settings import AdmissionSettings
    from tests.server.conftest import make_settings, new_token

    settings = make_settings(
        database_url,
        fake_ollama.url,
        admission=AdmissionSettings(max_waiting=4, wait_s=2.0, quota_per_device=2),
        cache_ttl_s=0,
    )
    token = new_token(database_url)
    with TestClient(create_app(settings)) as client:
        for n in range(2):
            fake_ollama.enqueue(Behaviour.normal("Notez les horaires."))
            assert (
                _post(client, token, chat_body(f"{CALM} {n}", f"q{n}", "conv-q")).json()["status"]
                == "ok"
            )
        assert client.delete("/v1/conversations/conv-q", headers=auth(token)).status_code == 204
        third = _post(client, token, chat_body(CALM, "q3", "conv-r")).json()
        replay = _post(client, token, chat_body(CALM, "q3", "conv-r")).json()
    assert third["status"] == "quota"
    assert third["text"].endswith("appelez le 112.")
    assert replay["replayed"] is True  # a replay is not a new admission


def test_admission_is_atomic_under_concurrency(settings: Settings, token: str) -> None:
    """Twenty admissions at once for three places: exactly three get in."""
    from concurrent.futures import ThreadPoolExecutor

    engine = make_engine(settings.database_url)
    sessions = make_session_factory(engine)
    with sessions() as session:
        device = repository.device_by_token(session, token)
        assert device is not None

    def admit(_: int) -> tuple[int, int]:
        for _attempt in range(20):
            try:
                with sessions() as session:
                    return repository.admit_quota(session, device.id, 3, None)
            except Exception:  # noqa: S112 - SQLite under contention: "database is locked"
                continue
        raise AssertionError("could not admit")

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(admit, range(20)))
    engine.dispose()
    admitted = sorted(mine for mine, _ in results if mine < 3)
    assert admitted == [0, 1, 2]


def test_lease_renewal_keeps_a_long_turn_ours(settings: Settings, token: str) -> None:
    engine = make_engine(settings.database_url)
    with make_session_factory(engine)() as session:
        device = repository.device_by_token(session, token)
        assert device is not None
        claim = _claim(
            session, repository.TurnKey(device.id, "c1", "m-long"), timedelta(seconds=-1)
        )
        repository.renew_leases(session, [claim.turn_id], 60)
        assert repository.recover_turns(session) == 0
        turn = session.get(Turn, claim.turn_id)
        assert turn is not None
        assert turn.state == "running"
        assert repository._aware(turn.lease_until) > utcnow()  # type: ignore[operator]
    engine.dispose()


def test_reads_and_erasures_without_the_database_say_so(client: TestClient, token: str) -> None:
    assert _post(client, token, chat_body(CALM, "m-r", "conv-r")).status_code == 200
    _dead_database(client)
    for method in ("GET", "DELETE"):
        response = client.request(method, "/v1/conversations/conv-r", headers=auth(token))
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"]["code"] == "storage_unavailable"
        assert "réessayez" in response.json()["error"]["message_fr"]
