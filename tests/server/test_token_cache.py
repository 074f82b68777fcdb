"""Tokens during an outage: confirmed ones pass for a bounded time, revoked ones never."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from server.db import repository
from server.db.session import make_engine, make_session_factory
from server.settings import Settings
from server.token_cache import TokenCache
from tests.fakes import unused_port_url
from tests.server.conftest import auth, chat_body, new_token


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_is_accepted_only_within_its_age() -> None:
    clock = _Clock()
    cache = TokenCache(max_age_s=60, clock=clock)
    cache.confirm("key", "device-1")
    clock.now += 59
    assert cache.without_database("key") == "device-1"
    clock.now += 2
    assert cache.without_database("key") is None
    assert cache.without_database("unknown") is None


def test_a_refresh_drops_revoked_tokens_and_stamps_the_others() -> None:
    clock = _Clock()
    cache = TokenCache(max_age_s=60, clock=clock)
    cache.confirm("kept", "d1")
    cache.confirm("revoked", "d2")
    clock.now += 50
    cache.refreshed(["kept", "revoked"], {"kept": "d1"})
    clock.now += 50
    assert cache.without_database("kept") == "d1"  # stamped again by the refresh
    assert cache.without_database("revoked") is None


def test_the_cache_is_bounded() -> None:
    cache = TokenCache(max_entries=3)
    for n in range(5):
        cache.confirm(f"k{n}", f"d{n}")
    assert len(cache) == 3
    assert cache.without_database("k0") is None
    assert cache.without_database("k4") == "d4"


def test_a_token_revoked_elsewhere_is_refused_during_an_outage(
    client: TestClient, token: str, settings: Settings
) -> None:
    other = new_token(settings.database_url, "still valid")
    for bearer in (token, other):
        assert (
            client.post(
                "/v1/chat", json=chat_body("bonjour", f"m-{bearer[-4:]}"), headers=auth(bearer)
            ).status_code
            == 200
        )
    engine = make_engine(settings.database_url)  # `nuisances tokens revoke`, another process
    with make_session_factory(engine)() as session:
        device = repository.device_by_token(session, token)
        assert device is not None
        repository.revoke_device(session, device.id)
    engine.dispose()
    services = client.app.state.services  # type: ignore[attr-defined]
    asyncio.run(services.refresh_tokens())  # the background refresh, every few seconds
    dead = make_engine(unused_port_url().replace("http://", "postgresql+psycopg://u@") + "/x")
    services.sessions = make_session_factory(dead)
    refused = client.post("/v1/chat", json=chat_body("bonjour", "m-after"), headers=auth(token))
    assert refused.status_code == 401
    accepted = client.post("/v1/chat", json=chat_body("bonjour", "m-after"), headers=auth(other))
    assert accepted.status_code == 200
    assert accepted.json()["safety"]["category"] == "rien"


def test_known_devices_are_checked_in_memory_from_the_first_request(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart (or a token made by another process, within one refresh), a device's
    first request is checked in memory, not behind a database lookup."""
    from server.main import create_app

    token = new_token(settings.database_url, "made before the start")
    lookups: list[str] = []
    real = repository.device_by_token

    def counted(session: object, bearer: str) -> object:
        lookups.append(bearer)
        return real(session, bearer)  # type: ignore[arg-type]

    monkeypatch.setattr(repository, "device_by_token", counted)
    with TestClient(create_app(settings)) as client:
        answer = client.post("/v1/chat", json=chat_body("bonjour", "first"), headers=auth(token))
        assert answer.status_code == 200
        assert lookups == []
        later = new_token(settings.database_url, "made by another process")
        services = client.app.state.services  # type: ignore[attr-defined]
        asyncio.run(services.refresh_tokens())  # the background refresh
        answer = client.post("/v1/chat", json=chat_body("bonjour", "later"), headers=auth(later))
        assert answer.status_code == 200
        assert lookups == []
        unknown = client.post("/v1/chat", json=chat_body("bonjour", "x"), headers=auth("nope"))
        assert unknown.status_code == 401
        assert lookups == ["nope"]  # an unknown token is still looked up
