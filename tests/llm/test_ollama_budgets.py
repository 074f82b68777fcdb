"""The Ollama provider under our budgets, against the fake Ollama on a real port.

One row per behaviour of the model server: the error class it becomes (hence the reply's
status), and, where the stream was open, the proof that we closed it (the fake saw the
client go away, so a real Ollama would stop generating).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from llm.budget import guarded_stream
from llm.config import Budgets, ProviderConfig
from llm.errors import (
    Busy,
    ConnectionRefused,
    DegenerateOutput,
    GenerationTimeout,
    IncompleteStream,
    MalformedLine,
    ModelError,
    ModelNotFound,
    ServerError,
    StreamError,
)
from llm.providers.ollama import OllamaProvider
from llm.types import ChatOptions, Chunk, Message
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama, unused_port_url

pytestmark = pytest.mark.anyio
BUDGETS = Budgets(
    connect_s=1.0, first_token_s=1.0, idle_s=0.5, total_s=3.0, num_predict=200,
    loop_repeats=10, retries=0,
)  # fmt: skip
MESSAGES = [Message("user", "Mon voisin fait du bruit.")]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


def _provider(url: str, budgets: Budgets = BUDGETS) -> OllamaProvider:
    return OllamaProvider(ProviderConfig(base_url=url, model=DEFAULT_MODEL), budgets)


def _saw_disconnect(fake: FakeOllama, before: int, timeout: float = 5.0) -> bool:
    """Whether the fake counted one more client disconnect than ``before`` (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fake.disconnects > before:
            return True
        time.sleep(0.01)
    return False


async def _collect(provider: OllamaProvider, budgets: Budgets = BUDGETS) -> list[Chunk]:
    chunks = []
    try:
        async for chunk in guarded_stream(provider, MESSAGES, ChatOptions(), budgets):
            chunks.append(chunk)
    finally:
        await provider.aclose()
    return chunks


async def test_normal_stream_reassembles_and_ends_with_stats(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal("Bonjour, notez les dates. [[conciliateur]]", chunk_size=5))
    chunks = await _collect(_provider(fake.url))
    assert "".join(c.text for c in chunks) == "Bonjour, notez les dates. [[conciliateur]]"
    assert chunks[-1].done
    assert chunks[-1].done_reason == "stop"
    assert chunks[-1].stats is not None
    assert chunks[-1].stats.eval_count == len(chunks) - 1
    sent = fake.requests[-1]
    assert sent["options"]["num_predict"] == 200
    assert sent["stream"] is True


@pytest.mark.parametrize(
    ("behaviour", "error", "closed_by_us"),
    [
        pytest.param(Behaviour.slow_first_byte(3.0), GenerationTimeout, True, id="slow first byte"),
        pytest.param(
            Behaviour.stall(after_chunks=2, seconds=3.0), GenerationTimeout, True, id="stall"
        ),
        pytest.param(Behaviour.endless(delay=0.0), DegenerateOutput, True, id="endless same chunk"),
        pytest.param(
            Behaviour.drop(after_chunks=2), IncompleteStream, False, id="dropped mid-stream"
        ),
        pytest.param(Behaviour.error_line(after_chunks=2), StreamError, False, id="error line"),
        pytest.param(
            Behaviour.malformed(after_chunks=2), MalformedLine, False, id="malformed line"
        ),
        pytest.param(Behaviour.not_found("single_quotes"), ModelNotFound, False, id="404 'model'"),
        pytest.param(Behaviour.not_found("double_quotes"), ModelNotFound, False, id='404 "model"'),
        pytest.param(Behaviour.busy(), Busy, False, id="503 busy"),
        pytest.param(Behaviour.rate_limited(), Busy, False, id="429"),
        pytest.param(Behaviour.server_error(), ServerError, False, id="500"),
    ],
)
async def test_fault_becomes_our_error(
    fake: FakeOllama, behaviour: Behaviour, error: type[ModelError], closed_by_us: bool
) -> None:
    before = fake.disconnects
    fake.enqueue(behaviour)
    with pytest.raises(error) as caught:
        await _collect(_provider(fake.url))
    assert (caught.value.provider, caught.value.model) == ("local", DEFAULT_MODEL)
    if closed_by_us:
        assert _saw_disconnect(fake, before)


async def test_refused_connection_is_unavailable() -> None:
    with pytest.raises(ConnectionRefused):
        await _collect(_provider(unused_port_url()))


async def test_consumer_stopping_early_closes_the_upstream(fake: FakeOllama) -> None:
    """A client disconnect: the turn stops reading; the model server must see it."""
    before = fake.disconnects
    fake.enqueue(Behaviour.endless(chunk="mot ", delay=0.02))
    provider = _provider(fake.url, BUDGETS.model_copy(update={"loop_repeats": 1000}))
    budgets = BUDGETS.model_copy(update={"loop_repeats": 1000})
    stream = guarded_stream(provider, MESSAGES, ChatOptions(), budgets)
    async for chunk in stream:
        assert chunk.text == "mot "
        break
    await stream.aclose()  # what cancelling the turn does
    await provider.aclose()
    assert _saw_disconnect(fake, before)


async def test_retry_before_first_token_on_503(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.busy())
    fake.enqueue(Behaviour.normal("Réponse après un 503."))
    budgets = BUDGETS.model_copy(update={"retries": 2, "retry_backoff_s": 0.05})
    chunks = await _collect(_provider(fake.url, budgets), budgets)
    assert "".join(c.text for c in chunks) == "Réponse après un 503."


async def test_no_retry_on_404(fake: FakeOllama) -> None:
    count = len(fake.requests)
    fake.enqueue(Behaviour.not_found())
    budgets = BUDGETS.model_copy(update={"retries": 2, "retry_backoff_s": 0.05})
    with pytest.raises(ModelNotFound):
        await _collect(_provider(fake.url, budgets), budgets)
    assert len(fake.requests) == count + 1


async def test_health_reports_reachable_present_loaded(fake: FakeOllama) -> None:
    provider = _provider(fake.url)
    health = await provider.health()
    await provider.aclose()
    assert (health.reachable, health.model_present, health.model_loaded) == (True, True, True)


async def test_health_of_a_missing_model_and_a_dead_server(fake: FakeOllama) -> None:
    missing = OllamaProvider(ProviderConfig(base_url=fake.url, model="absent:7b"), BUDGETS)
    health = await missing.health()
    await missing.aclose()
    assert health.reachable
    assert not health.model_present
    dead = _provider(unused_port_url())
    health = await dead.health()
    await dead.aclose()
    assert not health.reachable


async def test_warm_up_loads_the_model() -> None:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=False) as cold:
        provider = _provider(cold.url)
        assert (await provider.health()).model_loaded is False
        await provider.warm_up()
        assert (await provider.health()).model_loaded is True
        await provider.aclose()
