"""The fake Ollama server, driven by the official ``ollama`` Python client (sync and async)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Iterator
from typing import cast

import ollama
import pytest

from tests.fakes import BUSY_MESSAGE, DEFAULT_MODEL, Behaviour, FakeOllama, unused_port_url

TEXT = "Bonjour, notez les dates. [[conciliateur]]"
USER = [{"role": "user", "content": "Il y a de la fumée chez le voisin."}]


def close_sync(client: ollama.Client) -> None:
    """``Client.close`` is untyped in ollama 0.6 (and ``__enter__`` is missing)."""
    client.close()  # type: ignore[no-untyped-call]


async def close_async(client: ollama.AsyncClient) -> None:
    """``AsyncClient.close`` is untyped in ollama 0.6."""
    await client.close()  # type: ignore[no-untyped-call]


def chat_into(
    client: ollama.Client, received: list[ollama.ChatResponse], *, stream: bool = True
) -> None:
    """Chat and keep every part received before an error interrupts the answer."""
    if stream:
        received.extend(client.chat(model=DEFAULT_MODEL, messages=USER, stream=True))
    else:
        received.append(client.chat(model=DEFAULT_MODEL, messages=USER, stream=False))


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


@pytest.fixture
def client(fake: FakeOllama) -> Iterator[ollama.Client]:
    # ollama.Client defines __exit__ but not __enter__ (0.6.x): close it by hand.
    official = ollama.Client(host=fake.url, timeout=5.0)
    try:
        yield official
    finally:
        close_sync(official)


def test_streamed_chat(fake: FakeOllama, client: ollama.Client) -> None:
    fake.enqueue(Behaviour.normal(TEXT, chunk_size=4))
    parts = list(client.chat(model=DEFAULT_MODEL, messages=USER, stream=True))
    assert "".join(part.message.content or "" for part in parts) == TEXT
    final = parts[-1]
    assert (final.done, final.done_reason) == (True, "stop")
    assert final.eval_count == len(parts) - 1
    assert final.total_duration
    assert final.load_duration
    assert final.prompt_eval_count
    assert final.created_at is not None
    assert not any(part.done for part in parts[:-1])


def test_whole_chat(fake: FakeOllama, client: ollama.Client) -> None:
    fake.enqueue(Behaviour.normal(TEXT))
    reply = client.chat(model=DEFAULT_MODEL, messages=USER, options={"num_predict": 400})
    assert reply.message.content == TEXT
    assert reply.done_reason == "stop"
    assert fake.requests[-1]["stream"] is False
    assert fake.requests[-1]["options"] == {"num_predict": 400}


def test_load_with_empty_messages() -> None:
    with FakeOllama(loaded=False) as fake:
        client = ollama.Client(host=fake.url, timeout=5.0)
        assert client.ps().models == []
        reply = client.chat(model=DEFAULT_MODEL, messages=[])
        assert reply.done_reason == "load"
        assert [model.model for model in client.ps().models] == [DEFAULT_MODEL]
        close_sync(client)


def test_list_ps_and_show(client: ollama.Client) -> None:
    assert [model.model for model in client.list().models] == [DEFAULT_MODEL]
    running = client.ps().models
    assert [model.name for model in running] == [DEFAULT_MODEL]
    assert running[0].expires_at is not None
    shown = client.show(DEFAULT_MODEL)
    assert shown.details is not None
    assert shown.details.family == "qwen2"
    assert shown.capabilities is not None
    assert "completion" in shown.capabilities


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.not_found(), 404, f"model '{DEFAULT_MODEL}' not found"),
        (
            Behaviour.not_found("double_quotes"),
            404,
            f'model "{DEFAULT_MODEL}" not found, try pulling it first',
        ),
        (Behaviour.busy(), 503, BUSY_MESSAGE),
        (Behaviour.rate_limited("quota"), 429, "quota"),
        (Behaviour.server_error("boom"), 500, "boom"),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_refusals_raise_response_error(
    fake: FakeOllama,
    client: ollama.Client,
    behaviour: Behaviour,
    status: int,
    message: str,
    stream: bool,
) -> None:
    fake.enqueue(behaviour)
    with pytest.raises(ollama.ResponseError) as caught:
        chat_into(client, [], stream=stream)
    assert (caught.value.status_code, caught.value.error) == (status, message)


def test_unknown_model_is_a_404(client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="llama3.2", messages=USER)
    assert (caught.value.status_code, caught.value.error) == (404, "model 'llama3.2' not found")
    with pytest.raises(ollama.ResponseError) as shown:
        client.show("llama3.2")
    assert shown.value.error == "model 'llama3.2:latest' not found"


def test_mid_stream_error_line_raises_after_some_parts(
    fake: FakeOllama, client: ollama.Client
) -> None:
    fake.enqueue(Behaviour.error_line(after_chunks=2, message="runner died"))
    received: list[ollama.ChatResponse] = []
    with pytest.raises(ollama.ResponseError) as caught:
        chat_into(client, received)
    assert len(received) == 2
    assert caught.value.error == "runner died"
    assert caught.value.status_code == -1, "the client cannot know a status for a line"


def test_endless_stream_closed_by_the_client_is_seen(
    fake: FakeOllama, client: ollama.Client
) -> None:
    fake.enqueue(Behaviour.endless(delay=0.005))
    parts = cast(
        Generator[ollama.ChatResponse, None, None],
        client.chat(model=DEFAULT_MODEL, messages=USER, stream=True),
    )
    assert next(parts).message.content == "bla "
    assert next(parts).done is False
    parts.close()
    assert fake.wait_for_disconnect(timeout=5.0)


def test_refused_connection_is_a_connection_error() -> None:
    client = ollama.Client(host=unused_port_url(), timeout=5.0)
    with pytest.raises(ConnectionError):
        client.chat(model=DEFAULT_MODEL, messages=USER)
    close_sync(client)


@pytest.mark.anyio
async def test_async_client_stream_and_disconnect(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal(TEXT, chunk_size=5), Behaviour.stall(1, seconds=3.0))
    client = ollama.AsyncClient(host=fake.url, timeout=5.0)
    try:
        parts = [part async for part in await client.chat(DEFAULT_MODEL, USER, stream=True)]
        assert "".join(part.message.content or "" for part in parts) == TEXT
        stalled = cast(
            AsyncGenerator[ollama.ChatResponse, None],
            await client.chat(DEFAULT_MODEL, USER, stream=True),
        )
        first = await anext(stalled)
        assert first.done is False
        await stalled.aclose()
        assert await fake.wait_for_disconnect_async(within=5.0)
    finally:
        await close_async(client)
