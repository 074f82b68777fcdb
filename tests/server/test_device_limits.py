"""One device, at most ``device_turns`` turns in flight: the next gets 429, its card and when
to come back; the others' turns are not held up."""

from __future__ import annotations

import asyncio

import pytest

from server.main import create_app
from server.settings import AdmissionSettings
from tests.fakes import Behaviour, FakeOllama
from tests.server.conftest import (
    async_client,
    auth,
    chat_body,
    make_settings,
    new_token,
    sse_events,
)

pytestmark = pytest.mark.anyio

DANGER = "ça sent le gaz dans l'escalier"
SLOW = Behaviour.normal("Notez la date et l'heure de chaque épisode.", chunk_size=2, delay=0.05)


async def test_a_third_turn_in_flight_is_refused_with_the_card(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    settings = make_settings(
        database_url,
        fake_ollama.url,
        admission=AdmissionSettings(max_waiting=4, wait_s=5.0, device_turns=2, retry_after_s=7),
    )
    token = new_token(database_url)
    other = new_token(database_url, "another phone")
    fake_ollama.enqueue(SLOW, SLOW, SLOW)
    async with async_client(create_app(settings)) as http:
        first = [
            asyncio.create_task(
                http.post("/v1/chat", json=chat_body("bruit", f"m{n}"), headers=auth(token))
            )
            for n in range(2)
        ]
        await asyncio.sleep(0.3)  # both claimed, one generating, one waiting
        refused = await http.post("/v1/chat", json=chat_body(DANGER, "m3"), headers=auth(token))
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == "7"
        error = refused.json()["error"]
        assert error["code"] == "too_many_turns"
        assert error["retry_after_s"] == 7
        assert "112" in error["message_fr"]
        assert error["safety"]["category"] != "rien"
        assert error["safety"]["card"]

        streamed = await http.post(
            "/v1/chat",
            json=chat_body(DANGER, "m4"),
            headers={**auth(token), "Accept": "text/event-stream"},
        )
        events = sse_events(streamed.text)
        assert [kind for kind, _ in events if kind != "heartbeat"] == ["safety", "error"]
        assert events[0][1]["card"]
        assert events[-1][1]["error"]["code"] == "too_many_turns"

        # Another device is not refused meanwhile.
        answer = await http.post("/v1/chat", json=chat_body("bruit", "o1"), headers=auth(other))
        assert answer.status_code == 200
        assert [r.status_code for r in await asyncio.gather(*first)] == [200, 200]

        # Once they are answered, the device may send again; the refused id is free.
        again = await http.post("/v1/chat", json=chat_body(DANGER, "m3"), headers=auth(token))
        assert again.status_code == 200
        assert not again.json().get("replayed")
