"""An app wired to a real database and the fake Ollama, driven in-process over ASGI."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from llm.config import Budgets, ProviderConfig
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import AdmissionSettings, Settings
from tests.fakes import DEFAULT_MODEL, FakeOllama

FAST_BUDGETS = Budgets(
    connect_s=1.0, first_token_s=2.0, idle_s=1.0, total_s=5.0, retries=0, loop_repeats=50
)  # fmt: skip


@pytest.fixture(scope="module")
def fake_ollama() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as fake:
        yield fake


def make_settings(database_url: str, model_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "provider": ProviderConfig(base_url=model_url, model=DEFAULT_MODEL),
        "budgets": FAST_BUDGETS,
        "admission": AdmissionSettings(max_waiting=4, wait_s=2.0),
        "warm_up": False,
        "health_interval_s": 3600,
        "heartbeat_s": 5.0,
        "data_dir": Path(tempfile.mkdtemp(prefix="nuisances-data-")),
    }
    values.update(overrides)
    return Settings(**values)


def new_token(database_url: str, label: str = "test phone") -> str:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            return repository.create_device(session, label)[1]
    finally:
        engine.dispose()


@pytest.fixture
def settings(database_url: str, fake_ollama: FakeOllama) -> Settings:
    return make_settings(database_url, fake_ollama.url)


@pytest.fixture
def token(settings: Settings) -> str:
    return new_token(settings.database_url)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@contextlib.asynccontextmanager
async def async_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the app over ASGI, with the app's lifespan running."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            yield http


def chat_body(
    message: str, client_message_id: str, conversation: str = "c1", **extra: Any
) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "client_message_id": client_message_id,
        "message": message,
        **extra,
    }


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sse_events(body: str) -> list[tuple[str, Any]]:
    """Parse an SSE body into (event, data) pairs; heartbeats appear as ("heartbeat", None)."""
    import json

    events: list[tuple[str, Any]] = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        if block.startswith(":"):
            events.append(("heartbeat", None))
            continue
        kind = data = None
        for line in block.splitlines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        events.append((kind or "message", data))
    return events
