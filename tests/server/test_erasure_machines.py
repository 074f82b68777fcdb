"""An erasure served by one machine reaches the audit files of every machine."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from pydantic import SecretStr

from server.db import repository
from server.main import create_app
from server.settings import Settings
from tests.fakes import Behaviour, FakeOllama
from tests.server.conftest import auth, chat_body

QUESTION = "le voisin du dessus fait du bruit la nuit, que puis-je faire ?"


def _audit_lines(settings: Settings, tag: str) -> int:
    folder = settings.audit_path.parent
    return sum(path.read_text(encoding="utf-8").count(tag) for path in folder.glob("audit.jsonl*"))


def test_an_erasure_on_one_machine_reaches_the_others_audit_files(
    settings: Settings, token: str, fake_ollama: FakeOllama
) -> None:
    machines = [
        settings.model_copy(
            update={
                "data_dir": Path(tempfile.mkdtemp(prefix=f"machine-{name}-")),
                "secret": SecretStr("one-secret-for-the-deployment-" * 2),
                "spool_replay_s": 0.2,
            }
        )
        for name in ("a", "b")
    ]
    fake_ollama.enqueue(Behaviour.normal("Notez chaque nuit de bruit dans le journal."))
    with (
        TestClient(create_app(machines[0])) as first,
        TestClient(create_app(machines[1])) as second,
    ):
        answer = first.post(
            "/v1/chat", json=chat_body(QUESTION, "m1", "conv-x"), headers=auth(token)
        )
        assert answer.status_code == 200
        assert answer.json()["source"] == "llm"
        services = first.app.state.services  # type: ignore[attr-defined]
        device = services.tokens.without_database(repository.token_key(token))
        tag = services.tags.conversation(device, "conv-x")
        assert _audit_lines(machines[0], tag) >= 1
        assert _audit_lines(machines[1], tag) == 0

        erased = second.delete("/v1/conversations/conv-x", headers=auth(token))
        assert erased.status_code == 204
        deadline = time.monotonic() + 10
        while _audit_lines(machines[0], tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _audit_lines(machines[0], tag) == 0
