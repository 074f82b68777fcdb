"""The answer cache is per device, never shows a placeholder, and goes with an erasure."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from server.db import repository
from server.db.models import CachedAnswer
from server.settings import Settings
from tests.fakes import Behaviour, FakeOllama
from tests.server.conftest import auth, chat_body, new_token

QUESTION = "une question sur le tapage nocturne dans mon immeuble"


def _post(client: TestClient, token: str, body: dict[str, Any]) -> Any:
    response = client.post("/v1/chat", json=body, headers=auth(token))
    assert response.status_code == 200, response.text
    return response.json()


def _cached(client: TestClient, conversation_tag: str | None = None) -> int:
    services = client.app.state.services  # type: ignore[attr-defined]
    with services.sessions() as session:
        query = select(func.count()).select_from(CachedAnswer)
        if conversation_tag is not None:
            query = query.where(CachedAnswer.conversation == conversation_tag)
        return int(session.scalar(query) or 0)


def test_the_cache_never_crosses_devices(
    client: TestClient, token: str, settings: Settings, fake_ollama: FakeOllama
) -> None:
    other = new_token(settings.database_url, "another phone")
    fake_ollama.enqueue(Behaviour.normal("Notez chaque nuit de tapage dans le journal."))
    fake_ollama.enqueue(Behaviour.normal("Parlez-en d'abord calmement avec vos voisins."))
    mine = _post(client, token, chat_body(QUESTION, "m1", "conv-1"))
    theirs = _post(client, other, chat_body(QUESTION, "m1", "conv-1"))
    assert mine["source"] == theirs["source"] == "llm"
    assert theirs["text"] == "Parlez-en d'abord calmement avec vos voisins."
    again = _post(client, token, chat_body(QUESTION, "m2", "conv-2"))
    assert again["source"] == "cache"  # the same device, the same request: reused
    assert again["text"] == mine["text"]


def test_erasing_a_conversation_deletes_the_answers_cached_from_it(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    fake_ollama.enqueue(Behaviour.normal("Notez chaque nuit de tapage dans le journal."))
    fake_ollama.enqueue(Behaviour.normal("Une autre réponse, générée à nouveau."))
    _post(client, token, chat_body(QUESTION, "m1", "conv-e"))
    with services.sessions() as session:
        device = repository.device_by_token(session, token)
    assert device is not None
    tag = services.tags.conversation(device.id, "conv-e")
    assert _cached(client, tag) == 1
    assert client.delete("/v1/conversations/conv-e", headers=auth(token)).status_code == 204
    assert _cached(client, tag) == 0
    after = _post(client, token, chat_body(QUESTION, "m1", "conv-f"))
    assert after["source"] == "llm"
    assert after["text"] == "Une autre réponse, générée à nouveau."


def test_an_answer_with_a_placeholder_is_never_shown_nor_cached(
    client: TestClient, token: str, fake_ollama: FakeOllama
) -> None:
    # A placeholder the model made up: invalid, retried with the reason.
    fake_ollama.enqueue(Behaviour.normal("Joignez le médiateur au [téléphone-1] ou Mme PERS-2."))
    fake_ollama.enqueue(Behaviour.normal("Notez les horaires et écrivez au bailleur."))
    first = _post(client, token, chat_body(QUESTION, "p1", "conv-p"))
    assert first["text"] == "Notez les horaires et écrivez au bailleur."
    assert "identifiants de remplacement" in fake_ollama.requests[-1]["messages"][-1]["content"]
    # A name the model brought in: shown to this person as written, never cached (it would
    # come back as a token no later request could fill).
    fake_ollama.enqueue(Behaviour.normal("Parlez-en à Mme Durand, la gardienne."))
    fake_ollama.enqueue(Behaviour.normal("Une réponse générée à nouveau."))
    named = _post(client, token, chat_body(f"{QUESTION} ce soir", "p2", "conv-p2"))
    assert named["text"] == "Parlez-en à Mme Durand, la gardienne."
    again = _post(client, token, chat_body(f"{QUESTION} ce soir", "p3", "conv-p3"))
    assert again["source"] == "llm"
    assert "PERS-" not in again["text"]


def test_replicas_with_one_secret_share_the_cache_and_the_hashes(
    settings: Settings, token: str, fake_ollama: FakeOllama
) -> None:
    """Two machines (two data folders) on one database: with the deployment's ``secret`` they
    read each other's cached answers and name a device alike; with a key file each, they
    cannot (an entry signed by the other is rejected as tampered)."""
    import tempfile
    from pathlib import Path

    from pydantic import SecretStr

    from server.main import create_app

    secret = SecretStr("s3cr3t-" * 6)
    machines = [
        settings.model_copy(
            update={"data_dir": Path(tempfile.mkdtemp(prefix="replica-")), "secret": secret}
        )
        for _ in range(2)
    ]
    fake_ollama.enqueue(Behaviour.normal("Notez chaque nuit de tapage dans le journal."))
    with TestClient(create_app(machines[0])) as first:
        made = _post(first, token, chat_body(QUESTION, "r1", "conv-r1"))
        tag = first.app.state.services.tags.device("x")  # type: ignore[attr-defined]
    with TestClient(create_app(machines[1])) as second:
        reused = _post(second, token, chat_body(QUESTION, "r2", "conv-r2"))
        assert second.app.state.services.tags.device("x") == tag  # type: ignore[attr-defined]
    assert made["source"] == "llm"
    assert (reused["source"], reused["text"]) == ("cache", made["text"])

    alone = settings.model_copy(update={"data_dir": Path(tempfile.mkdtemp(prefix="alone-"))})
    fake_ollama.enqueue(Behaviour.normal("Une réponse générée à nouveau."))
    with TestClient(create_app(alone)) as third:
        assert _post(third, token, chat_body(QUESTION, "r3", "conv-r3"))["source"] == "llm"
