"""Bad input, auth, and the other routes: every refusal a clear 4xx in French and English."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.db import repository
from server.db.session import make_engine, make_session_factory
from tests.server.conftest import auth, chat_body

VALID = chat_body("le voisin fait du bruit", "m-valid")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        pytest.param({**VALID, "message": ""}, 422, "empty_message", id="empty"),
        pytest.param({**VALID, "message": "   \n\t "}, 422, "empty_message", id="blank"),
        pytest.param(
            {**VALID, "message": "\u200b\u200d\ufeff"}, 422, "empty_message", id="invisible only"
        ),
        pytest.param({**VALID, "message": "a\x00b"}, 422, "control_characters", id="NUL"),
        pytest.param(
            {**VALID, "message": "\x07\x08\x1b"}, 422, "control_characters", id="controls only"
        ),
        pytest.param(
            {**VALID, "message": "x" * 2001}, 422, "message_too_long", id="over the limit"
        ),
        pytest.param({**VALID, "message": 42}, 422, "invalid_request", id="wrong type"),
        pytest.param({**VALID, "conversation_id": "a b"}, 422, "invalid_request", id="bad id"),
        pytest.param({**VALID, "region": "99"}, 422, "invalid_request", id="bad département"),
        pytest.param({**VALID, "extra": 1}, 422, "invalid_request", id="unknown field"),
        pytest.param({"message": "bonjour"}, 422, "invalid_request", id="missing fields"),
        pytest.param([1, 2], 422, "invalid_request", id="not an object"),
    ],
)
def test_bad_json_body(client: TestClient, token: str, body: Any, status: int, code: str) -> None:
    response = client.post("/v1/chat", json=body, headers=auth(token))
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message_fr"]
    assert error["message_en"]
    assert "bruit" not in response.text  # never echoes what was sent


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        pytest.param(b'{"conversation_id": "c1", ', 400, "invalid_json", id="malformed JSON"),
        pytest.param(b"\xff\xfe\x00garbage", 400, None, id="invalid UTF-8"),
        pytest.param(
            b'{"message": "' + b"a" * 40_000 + b'"}', 413, "body_too_large", id="huge body"
        ),
    ],
)
def test_bad_raw_body(
    client: TestClient, token: str, raw: bytes, status: int, code: str | None
) -> None:
    headers = {**auth(token), "Content-Type": "application/json"}
    response = client.post("/v1/chat", content=raw, headers=headers)
    assert response.status_code == status
    error = response.json()["error"]
    if code is not None:
        assert error["code"] == code
    assert error["message_fr"]
    assert error["message_en"]


def test_chunked_oversized_body_is_refused(client: TestClient, token: str) -> None:
    def chunks() -> Any:
        for _ in range(50):
            yield b"x" * 1_000

    response = client.post(
        "/v1/chat", content=chunks(), headers={**auth(token), "Content-Type": "application/json"}
    )
    assert response.status_code == 413


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no header"),
        pytest.param({"Authorization": "Bearer nui_not-a-real-token"}, id="unknown token"),
        pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="wrong scheme"),
        pytest.param({"Authorization": "Bearer "}, id="empty token"),
    ],
)
def test_missing_or_unknown_token_is_401(client: TestClient, headers: dict[str, str]) -> None:
    for method, path in (
        ("POST", "/v1/chat"),
        ("GET", "/v1/directory"),
        ("GET", "/v1/conversations/c1"),
    ):
        response = client.request(method, path, json=VALID, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "unauthorized"


def test_a_revoked_token_is_401_from_the_next_refresh(
    client: TestClient, token: str, database_url: str
) -> None:
    """Tokens are checked in memory (the card never waits for storage); the refresh, every
    ``token_refresh_s`` seconds, is what honours a revocation made by another process."""
    assert client.post("/v1/chat", json=VALID, headers=auth(token)).status_code == 200
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        device = repository.device_by_token(session, token)
        assert device is not None
        repository.revoke_device(session, device.id)
    engine.dispose()
    services = client.app.state.services  # type: ignore[attr-defined]
    asyncio.run(services.refresh_tokens())
    response = client.post("/v1/chat", json=chat_body("encore", "m-after"), headers=auth(token))
    assert response.status_code == 401


def test_operations_routes(client: TestClient, token: str) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"]["database"] == "ok"
    client.post("/v1/chat", json=VALID, headers=auth(token))
    metrics = client.get("/metrics").text
    assert 'nuisances_turns_total{category="rien",source="llm",status="ok"}' in metrics
    assert "nuisances_detection_seconds_bucket" in metrics
    assert "nuisances_queue_depth" in metrics
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert "examples" in str(schema["components"]["schemas"]["ChatRequest"])


def test_directory_has_an_etag(client: TestClient, token: str) -> None:
    first = client.get("/v1/directory", headers=auth(token))
    assert first.status_code == 200
    assert {c["id"] for c in first.json()} >= {
        "urgence-europeenne",
        "samu",
        "pompiers",
        "prevention-suicide",
    }
    etag = first.headers["etag"]
    again = client.get("/v1/directory", headers={**auth(token), "If-None-Match": etag})
    assert again.status_code == 304


def test_conversation_read_and_erase(client: TestClient, token: str) -> None:
    client.post("/v1/chat", json=chat_body("un message", "e1", "conv-e"), headers=auth(token))
    read = client.get("/v1/conversations/conv-e", headers=auth(token))
    assert read.status_code == 200
    assert read.json()["turns"][0]["message"] == "un message"
    assert client.delete("/v1/conversations/conv-e", headers=auth(token)).status_code == 204
    assert client.get("/v1/conversations/conv-e", headers=auth(token)).status_code == 404
    assert client.delete("/v1/conversations/conv-e", headers=auth(token)).status_code == 404


def test_a_device_cannot_read_another_devices_conversation(
    client: TestClient, token: str, database_url: str
) -> None:
    from tests.server.conftest import new_token

    client.post("/v1/chat", json=chat_body("privé", "p1", "conv-p"), headers=auth(token))
    other = new_token(database_url, "someone else")
    assert client.get("/v1/conversations/conv-p", headers=auth(other)).status_code == 404
