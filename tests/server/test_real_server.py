"""One real uvicorn server on a real port: a client that hangs up cancels the generation."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from server.db import repository
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import Settings
from tests.fakes import Behaviour, FakeOllama
from tests.live_server import serving
from tests.server.conftest import auth, chat_body


@pytest.fixture
def live_url(settings: Settings) -> Iterator[str]:
    with serving(create_app(settings)) as url:
        yield url


def test_hanging_up_cancels_the_generation_upstream(
    live_url: str, token: str, fake_ollama: FakeOllama, settings: Settings
) -> None:
    fake_ollama.enqueue(Behaviour.endless(chunk="encore ", delay=0.05))
    before = fake_ollama.disconnects
    headers = {**auth(token), "Accept": "text/event-stream"}
    body = chat_body("une question sur le bruit", "m-hangup")
    with httpx.stream("POST", f"{live_url}/v1/chat", json=body, headers=headers, timeout=10) as r:
        seen = []
        for line in r.iter_lines():
            if line.startswith("event: "):
                seen.append(line[7:])
            if seen.count("delta") >= 2:
                break  # the person closes the app
    assert seen[0] == "safety"
    deadline = time.monotonic() + 10
    while fake_ollama.disconnects <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_ollama.disconnects > before  # the model server saw us go: it stops generating
    engine = make_engine(settings.database_url)
    with make_session_factory(engine)() as session:
        state = None
        while time.monotonic() < deadline:
            turns = repository.conversation_turns(session, _device(session, token), "c1")
            state = turns[-1].state if turns else None
            if state == "cancelled":
                break
            session.expire_all()
            time.sleep(0.05)
    engine.dispose()
    assert state == "cancelled"


def _device(session: object, token: str) -> str:
    device = repository.device_by_token(session, token)  # type: ignore[arg-type]
    assert device is not None
    return device.id
