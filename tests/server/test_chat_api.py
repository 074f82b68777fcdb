"""POST /v1/chat through HTTP (in-process ASGI), against SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from llm.fallback import EMERGENCY_LINE
from server.main import create_app
from server.settings import Settings
from tests.fakes import Behaviour, FakeOllama, unused_port_url
from tests.server.conftest import (
    async_client,
    auth,
    chat_body,
    make_settings,
    new_token,
    sse_events,
)

GAS = "ça pue le gaz dans l'escalier depuis ce matin"


def _stream(client: TestClient, token: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    headers = {**auth(token), "Accept": "text/event-stream"}
    with client.stream("POST", "/v1/chat", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_events(response.read().decode())


def test_stream_sends_the_card_first_then_deltas_then_done(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Sortez sans toucher aux interrupteurs. [[pompiers]]"))
    events = _stream(client, token, chat_body(GAS, "m-stream"))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "safety"
    assert kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"}
    safety = events[0][1]
    assert safety["category"] == "danger"
    assert [c["id"] for c in safety["card"]][:2] == ["pompiers", "grdf"]
    done = events[-1][1]
    assert done["source"] == "llm"
    assert done["status"] == "ok"
    assert "".join(data["text"] for kind, data in events if kind == "delta") == done["text"]
    assert "Sapeurs-pompiers (18)" in done["text"]  # the number comes from the directory
    assert done["contacts"][0]["number"] == "18"


def test_the_card_carries_the_first_steps_of_its_topics(client: TestClient, token: str) -> None:
    safety = client.post("/v1/chat", json=chat_body(GAS, "m-steps"), headers=auth(token)).json()[
        "safety"
    ]
    assert safety["rules"] == ["gaz.presence"]
    assert len(safety["steps"]) == 1
    assert "Ne touchez à aucun interrupteur" in safety["steps"][0]
    assert "(0 800 47 33 33)" in safety["steps"][0]  # the number comes from the directory
    assert "[[" not in safety["steps"][0]


def test_the_learned_layer_alone_shows_its_category_card_and_steps(
    client: TestClient, token: str
) -> None:
    message = (
        "un bébé pleure dans une voiture fermée en plein soleil sur le parking depuis une heure"
    )
    safety = client.post(
        "/v1/chat", json=chat_body(message, "m-model"), headers=auth(token)
    ).json()["safety"]
    assert safety["category"] == "danger"
    assert safety["rules"] == ["model.danger"]
    assert [c["id"] for c in safety["card"]][:4] == [
        "urgence-europeenne",
        "samu",
        "police",
        "pompiers",
    ]
    assert "Si quelqu'un est en danger en ce moment" in safety["steps"][0]


def test_no_card_no_steps(client: TestClient, token: str) -> None:
    safety = client.post(
        "/v1/chat",
        json=chat_body("le chien du voisin aboie le soir", "m-calm"),
        headers=auth(token),
    ).json()["safety"]
    assert safety["category"] == "rien"
    assert safety["card"] == safety["steps"] == []


def test_done_equals_the_json_answer(client: TestClient, token: str) -> None:
    streamed = _stream(client, token, chat_body("bonjour, une question sur le bruit", "m-same"))[
        -1
    ][1]
    replay = client.post(
        "/v1/chat",
        json=chat_body("bonjour, une question sur le bruit", "m-same"),
        headers=auth(token),
    ).json()
    assert replay.pop("replayed") is True
    streamed.pop("replayed")
    assert replay == streamed


def test_model_down_gives_the_card_and_a_fallback(database_url: str) -> None:
    settings = make_settings(database_url, unused_port_url())
    token = new_token(database_url)
    with TestClient(create_app(settings)) as client:
        answer = client.post("/v1/chat", json=chat_body(GAS, "m-down"), headers=auth(token)).json()
    assert answer["safety"]["card"]
    assert answer["source"] == "fallback"
    assert answer["status"] == "unavailable"
    assert answer["text"].endswith(EMERGENCY_LINE)
    assert "Ne touchez à aucun interrupteur" in answer["text"]  # the gas steps come first


def test_sequential_retry_replays_without_a_second_generation(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Notez les horaires dans le journal."))
    before = len(fake_ollama.requests)
    first = client.post(
        "/v1/chat", json=chat_body("du bruit la nuit", "m-retry"), headers=auth(token)
    )
    second = client.post(
        "/v1/chat", json=chat_body("du bruit la nuit", "m-retry"), headers=auth(token)
    )
    assert first.json()["text"] == second.json()["text"] == "Notez les horaires dans le journal."
    assert second.json()["replayed"] is True
    assert len(fake_ollama.requests) == before + 1


@pytest.mark.anyio
async def test_concurrent_retry_waits_for_the_first_and_generates_once(
    settings: Settings, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(
        Behaviour.normal("Une réponse lente, mot après mot.", chunk_size=3, delay=0.05)
    )
    before = len(fake_ollama.requests)
    async with async_client(create_app(settings)) as http:
        body = chat_body("du bruit la nuit", "m-concurrent")
        answers = await asyncio.gather(
            *(http.post("/v1/chat", json=body, headers=auth(token)) for _ in range(3))
        )
    texts = {a.json()["text"] for a in answers}
    assert texts == {"Une réponse lente, mot après mot."}
    assert sorted(a.json()["replayed"] for a in answers) == [False, True, True]
    assert len(fake_ollama.requests) == before + 1


def test_history_is_sent_to_the_model(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Première réponse."))
    fake_ollama.enqueue(Behaviour.normal("Deuxième réponse."))
    client.post("/v1/chat", json=chat_body("premier message", "h1", "conv-h"), headers=auth(token))
    client.post("/v1/chat", json=chat_body("second message", "h2", "conv-h"), headers=auth(token))
    messages = fake_ollama.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "premier message" in messages[1]["content"]
    assert messages[2]["content"] == "Première réponse."


def test_heartbeats_while_the_model_is_slow(database_url: str, fake_ollama: FakeOllama) -> None:
    settings = make_settings(database_url, fake_ollama.url, heartbeat_s=0.1)
    token = new_token(database_url)
    fake_ollama.enqueue(Behaviour.slow_first_byte(0.5, "Enfin."))
    with TestClient(create_app(settings)) as client:
        events = _stream(client, token, chat_body("une question", "m-heartbeat"))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "safety"
    assert "heartbeat" in kinds
    assert kinds[-1] == "done"


def test_database_unreachable_still_answers_with_the_card_and_the_model(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    ok = client.post("/v1/chat", json=chat_body("bonjour", "m-before"), headers=auth(token))
    assert ok.status_code == 200  # the token is now known to this process
    services = client.app.state.services  # type: ignore[attr-defined]
    from server.db.session import make_engine, make_session_factory

    dead = make_engine(unused_port_url().replace("http://", "postgresql+psycopg://u@") + "/none")
    services.sessions = make_session_factory(dead)
    fake_ollama.enqueue(Behaviour.normal("Sortez sans toucher aux interrupteurs. [[pompiers]]"))
    answer = client.post("/v1/chat", json=chat_body(GAS, "m-dead-db"), headers=auth(token))
    assert answer.status_code == 200
    body = answer.json()
    assert body["safety"]["category"] == "danger"
    assert body["safety"]["card"]
    assert body["source"] == "llm"  # the model is still called, the turn spooled
    assert "Sapeurs-pompiers (18)" in body["text"]
    assert services.spool.size() > 0
