"""Logs are JSON lines with request ids, and never hold what a person wrote."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from server.logs import JsonFormatter
from tests.fakes import Behaviour, FakeOllama
from tests.server.conftest import auth, chat_body

PRIVATE_TEXT = "Mon voisin Karim Benali (06 12 34 56 78) me menace de mort"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def test_logs_hold_no_message_text_nor_number(
    client: TestClient, token: str, fake_ollama: FakeOllama, captured: io.StringIO
) -> None:
    fake_ollama.enqueue(Behaviour.normal("Contactez Karim Benali au 06 12 34 56 78."))
    response = client.post(
        "/v1/chat",
        json=chat_body(PRIVATE_TEXT, "m-logs"),
        headers={**auth(token), "X-Request-ID": "req-42"},
    )
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "req-42"
    lines = [json.loads(line) for line in captured.getvalue().splitlines() if line.strip()]
    assert lines, "nothing was logged"
    output = captured.getvalue()
    for forbidden in ("Karim", "Benali", "06 12 34 56 78", "menace de mort", token):
        assert forbidden not in output, forbidden
    turn = [line for line in lines if line.get("event") == "turn answered"]
    assert turn
    assert turn[0]["request_id"] == "req-42"
    assert turn[0]["category"] == "represailles"


def test_extra_fields_outside_the_whitelist_are_dropped(captured: io.StringIO) -> None:
    logging.getLogger("nuisances.test").info(
        "an event", extra={"message_text": "Karim", "status": "ok"}
    )
    entry = json.loads(captured.getvalue().splitlines()[-1])
    assert entry["status"] == "ok"
    assert "Karim" not in captured.getvalue()
