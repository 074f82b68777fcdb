"""Failed token checks are throttled per client address, before any token lookup."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.auth_throttle import AuthThrottle, Turn
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import LimitsSettings
from tests.fakes import FakeOllama
from tests.server.conftest import auth, make_settings, new_token


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_is_refused_after_its_failures_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    throttle = AuthThrottle(3, 60.0, clock=clock)
    for _ in range(2):
        throttle.failed("a")
        clock.now += 10
    assert throttle.retry_after("a") is None  # two failures: still allowed
    throttle.failed("a")  # failures at t=0, 10, 20
    clock.now += 5  # t=25
    assert throttle.retry_after("a") == 35  # the first failure leaves the window at t=60
    assert throttle.retry_after("b") is None  # other addresses are not concerned
    clock.now += 35  # t=60: the failure of t=0 is out, one more try is allowed
    assert throttle.retry_after("a") is None
    throttle.failed("a")  # failures at t=10, 20, 60
    assert throttle.retry_after("a") == 10


def test_retry_after_is_a_whole_number_of_seconds_at_least_one() -> None:
    clock = Clock()
    throttle = AuthThrottle(1, 2.0, clock=clock)
    throttle.failed("a")
    clock.now += 1.9999
    assert throttle.retry_after("a") == 1
    clock.now += 0.0001
    assert throttle.retry_after("a") is None


@pytest.mark.anyio
async def test_lookups_take_turns_and_each_turn_checks_the_budget_again() -> None:
    clock = Clock()
    throttle = AuthThrottle(2, 60.0, concurrent=2, clock=clock)
    first, second = await throttle.turn("a"), await throttle.turn("a")
    assert isinstance(first, Turn)
    assert isinstance(second, Turn)
    assert throttle.retry_after("a") is None  # lookups under way are not failures
    third = asyncio.ensure_future(throttle.turn("a"))
    fourth = asyncio.ensure_future(throttle.turn("a"))
    other = await throttle.turn("b")  # other addresses have their own turns
    assert isinstance(other, Turn)
    await asyncio.sleep(0)
    assert not third.done()  # two at once: the third waits
    first.end(ok=True)
    first.end(ok=False)  # ended once: neither a second place nor a failure
    turn = await third
    assert isinstance(turn, Turn)
    assert not fourth.done()
    second.end(ok=False)
    turn.end(ok=False)  # two failures: the budget is spent before the fourth starts
    assert await fourth == 60
    assert throttle.retry_after("a") == 60


@pytest.mark.anyio
async def test_a_wait_that_expires_goes_ahead_unless_over_budget() -> None:
    clock = Clock()
    throttle = AuthThrottle(2, 60.0, concurrent=1, wait_s=0.01, clock=clock)
    held = await throttle.turn("a")
    assert isinstance(held, Turn)
    late = await throttle.turn("a")  # the lookup ahead is slow: this one goes ahead anyway
    assert isinstance(late, Turn)
    late.end(ok=False)
    throttle.failed("a")
    assert await throttle.turn("a") == 60  # over budget: refused
    held.end(ok=True)
    assert throttle.retry_after("a") == 60


def test_memory_is_bounded_and_the_least_recent_address_is_forgotten() -> None:
    clock = Clock()
    throttle = AuthThrottle(1, 60.0, max_addresses=3, clock=clock)
    for address in ("a", "b", "c"):
        throttle.failed(address)
    assert throttle.retry_after("a") is not None  # "a" seen again: "b" is now the oldest
    throttle.failed("d")
    assert len(throttle) == 3
    assert throttle.retry_after("b") is None  # forgotten
    assert all(throttle.retry_after(x) is not None for x in ("a", "c", "d"))
    for n in range(10_000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(throttle) == 3


def test_one_warning_per_address_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    throttle = AuthThrottle(1, 600.0, log_interval_s=10.0, clock=clock)
    throttle.failed("198.51.100.9")
    throttle.failed("203.0.113.4")
    with caplog.at_level(logging.WARNING, logger="nuisances.auth"):
        for _ in range(5):
            throttle.retry_after("198.51.100.9")
            clock.now += 1
        throttle.retry_after("203.0.113.4")
        clock.now += 10
        throttle.retry_after("198.51.100.9")
    lines = [(r.__dict__["client"], r.__dict__["count"]) for r in caplog.records]
    assert lines == [("198.51.100.9", 1), ("203.0.113.4", 1), ("198.51.100.9", 5)]


@contextlib.asynccontextmanager
async def clients(app: FastAPI, *hosts: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """One httpx client per client address, all on the app over ASGI, lifespan running."""
    async with app.router.lifespan_context(app), contextlib.AsyncExitStack() as stack:
        made = []
        for host in hosts:
            transport = httpx.ASGITransport(app=app, client=(host, 40000))
            made.append(
                await stack.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url="http://app")
                )
            )
        yield made


@pytest.mark.anyio
async def test_after_n_failures_even_a_valid_token_gets_429_without_a_lookup(
    database_url: str,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits = LimitsSettings(auth_failures=3, auth_window_s=60, log_interval_s=60)
    settings = make_settings(database_url, fake_ollama.url, limits=limits)
    token = new_token(database_url)
    lookups: list[str] = []
    real_lookup = repository.device_by_token

    def counted(session: Any, presented: str) -> Any:
        lookups.append(presented)
        return real_lookup(session, presented)

    monkeypatch.setattr(repository, "device_by_token", counted)
    app = create_app(settings)
    async with clients(app, "203.0.113.66", "198.51.100.10") as (attacker, neighbour):
        for _ in range(3):
            guess = await attacker.get("/v1/directory", headers=auth(secrets.token_urlsafe(32)))
            assert guess.status_code == 401
        assert len(lookups) == 3
        with caplog.at_level(logging.WARNING, logger="nuisances.auth"):
            refused = [await attacker.get("/v1/directory", headers=auth(token)) for _ in range(4)]
        assert [r.status_code for r in refused] == [429] * 4
        assert 1 <= int(refused[0].headers["retry-after"]) <= 60
        error = refused[0].json()["error"]
        assert error["code"] == "too_many_failed_logins"
        assert error["retry_after_s"] == int(refused[0].headers["retry-after"])
        assert error["message_fr"]
        assert error["message_en"]
        assert len(lookups) == 3  # refused before any token lookup
        warnings = [r for r in caplog.records if r.getMessage() == "failed logins throttled"]
        assert [(r.__dict__["client"], r.__dict__["count"]) for r in warnings] == [
            ("203.0.113.66", 1)
        ]  # once per interval, with the address
        # Another address, the same valid token: unaffected.
        assert (await neighbour.get("/v1/directory", headers=auth(token))).status_code == 200
        # No token at all is not a guess: it does not count against the address.
        assert (await neighbour.get("/v1/directory")).status_code == 401
        for _ in range(3):
            await neighbour.get("/v1/directory")
        assert (await neighbour.get("/v1/directory", headers=auth(token))).status_code == 200


def counted_lookups(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[int]]:
    """Tokens looked up in the database, and the most lookups ever under way at once (each
    made a little slow, so that concurrent requests do overlap)."""
    lookups: list[str] = []
    running = [0]
    peak = [0]
    lock = threading.Lock()
    real_lookup = repository.device_by_token

    def counted(session: Any, presented: str) -> Any:
        with lock:
            lookups.append(presented)
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            time.sleep(0.01)
            return real_lookup(session, presented)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(repository, "device_by_token", counted)
    return lookups, peak


@pytest.mark.anyio
async def test_concurrent_guesses_cost_at_most_the_budget_plus_the_places(
    database_url: str, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = LimitsSettings()  # 20 failures per 60 s, 4 lookups at once
    assert (limits.auth_failures, limits.auth_concurrent) == (20, 4)
    settings = make_settings(database_url, fake_ollama.url, limits=limits)
    lookups, peak = counted_lookups(monkeypatch)
    async with clients(create_app(settings), "203.0.113.66") as (attacker,):
        guesses = await asyncio.gather(
            *(
                attacker.get("/v1/directory", headers=auth(secrets.token_urlsafe(32)))
                for _ in range(30)
            )
        )
    assert 20 <= len(lookups) <= 20 + 4
    assert peak[0] <= 4
    statuses = sorted(r.status_code for r in guesses)
    assert statuses == [401] * len(lookups) + [429] * (30 - len(lookups))
    refused = next(r for r in guesses if r.status_code == 429)
    assert refused.json()["error"]["code"] == "too_many_failed_logins"
    assert 1 <= int(refused.headers["retry-after"]) <= 60


@pytest.mark.anyio
async def test_many_new_devices_behind_one_address_are_never_refused(
    database_url: str, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrade(database_url)
    settings = make_settings(database_url, fake_ollama.url)  # default limits
    lookups, peak = counted_lookups(monkeypatch)
    async with clients(create_app(settings), "203.0.113.66") as (office,):
        # Made after the start (the tokens loaded then do not have them): each is looked up.
        engine = make_engine(database_url)
        try:
            with make_session_factory(engine)() as session:
                tokens = [repository.create_device(session, f"phone {n}")[1] for n in range(60)]
        finally:
            engine.dispose()
        first = await asyncio.gather(
            *(office.get("/v1/directory", headers=auth(token)) for token in tokens)
        )
        assert [r.status_code for r in first] == [200] * 60
        assert len(lookups) == 60
        assert 1 < peak[0] <= 4  # concurrent, a few at a time
        # Confirmed now: from memory, without waiting or looking up.
        again = await asyncio.gather(
            *(office.get("/v1/directory", headers=auth(token)) for token in tokens)
        )
        assert [r.status_code for r in again] == [200] * 60
        assert len(lookups) == 60
