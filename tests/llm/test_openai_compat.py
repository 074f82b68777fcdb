"""The OpenAI-compatible provider against the fake SSE server on a real port.

One row per behaviour of the server and the error class it becomes; streams reassembled; an
early close seen by the server as a disconnect; health and warm-up that never leak httpx.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator

import anyio
import pytest

from llm.config import Budgets, ProviderConfig
from llm.errors import (
    Busy,
    ConnectionRefused,
    GenerationTimeout,
    IncompleteStream,
    MalformedLine,
    ModelError,
    ModelNotFound,
    ServerError,
    StreamError,
    Unavailable,
)
from llm.providers.base import Provider
from llm.providers.openai_compat import _SSE, JsonMode, OpenAICompatProvider
from llm.types import ChatOptions, Chunk, Message
from tests.fakes import unused_port_url
from tests.fakes.fake_openai import FakeOpenAI, Reply

pytestmark = pytest.mark.anyio
MODEL = "smollm2"
BUDGETS = Budgets(connect_s=1.0, first_token_s=0.5, idle_s=0.5, total_s=3.0, num_predict=200)
MESSAGES = [Message("system", "Réponds en français."), Message("user", "Mon voisin crie.")]
TEXT = "Bonjour, notez les dates et les heures. [[conciliateur]]"
SCHEMA: dict[str, object] = {"type": "object", "properties": {"note": {"type": "integer"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=[MODEL]) as server:
        yield server


def make(
    url: str, model: str = MODEL, *, json_mode: JsonMode = "auto", api_key_env: str | None = None
) -> OpenAICompatProvider:
    config = ProviderConfig(
        name="llamacpp", type="openai_compat", base_url=url, model=model, api_key_env=api_key_env
    )
    return OpenAICompatProvider(config, BUDGETS, json_mode=json_mode)


@pytest.fixture
async def provider(fake: FakeOpenAI) -> AsyncIterator[OpenAICompatProvider]:
    made = make(fake.url)
    yield made
    await made.aclose()


async def collect(
    provider: OpenAICompatProvider,
    options: ChatOptions | None = None,
    into: list[Chunk] | None = None,
) -> list[Chunk]:
    """Every chunk of one stream, also appended to ``into`` as they come (kept on error)."""
    received = [] if into is None else into
    async for chunk in provider.stream(MESSAGES, options or ChatOptions()):
        received.append(chunk)
    return received


# -- success ----------------------------------------------------------------------------------


async def test_is_a_provider(provider: OpenAICompatProvider) -> None:
    assert isinstance(provider, Provider)


@pytest.mark.parametrize(
    ("reply", "eval_ns"),
    [
        pytest.param(Reply.normal(TEXT), None, id="openai-lf"),
        pytest.param(Reply.normal(TEXT, crlf=True), None, id="sse-starlette-crlf"),
        pytest.param(Reply.normal(TEXT, timings=True), 20_000_000, id="llama.cpp-timings"),
        pytest.param(Reply.normal(TEXT, chunk_size=1), None, id="one-char-deltas"),
    ],
)
async def test_stream_reassembles_text(
    fake: FakeOpenAI, provider: OpenAICompatProvider, reply: Reply, eval_ns: int | None
) -> None:
    fake.enqueue(reply)
    chunks = await collect(provider)
    *parts, last = chunks
    pieces = len(reply.pieces()[0])
    assert "".join(c.text for c in parts) == TEXT
    assert all(c.text and not c.done for c in parts)  # role-only and empty deltas skipped
    assert len(parts) == pieces
    assert (last.done, last.text, last.done_reason) == (True, "", "stop")
    assert last.stats is not None
    assert (last.stats.eval_count, last.stats.prompt_eval_count) == (pieces, 12)
    if eval_ns is not None:
        assert last.stats.eval_duration_ns == eval_ns * pieces
    assert last.stats.total_duration_ns


async def test_request_body(fake: FakeOpenAI, provider: OpenAICompatProvider) -> None:
    await collect(provider, ChatOptions(temperature=0.1, seed=7, num_predict=999))
    await collect(provider, ChatOptions())
    with_seed, without = fake.requests
    assert with_seed["model"] == MODEL
    assert with_seed["messages"] == [m.as_dict() for m in MESSAGES]
    assert (with_seed["stream"], with_seed["temperature"], with_seed["seed"]) == (True, 0.1, 7)
    assert with_seed["max_tokens"] == BUDGETS.num_predict  # our budget caps the caller's ask
    assert without["max_tokens"] == 200
    assert "seed" not in without
    assert "response_format" not in without


async def test_max_tokens_ends_with_length(
    fake: FakeOpenAI, provider: OpenAICompatProvider
) -> None:
    chunks = await collect(provider, ChatOptions(num_predict=3))
    assert len(chunks) == 4
    assert chunks[-1].done_reason == "length"


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_base_url_with_or_without_v1(fake: FakeOpenAI, suffix: str) -> None:
    provider = make(fake.url + suffix)
    try:
        assert (await collect(provider))[-1].done
        assert (await provider.health()).ok
    finally:
        await provider.aclose()


async def test_bearer_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test")
    with FakeOpenAI(models=[MODEL], api_key="sk-test") as fake:
        provider = make(fake.url, api_key_env="TEST_OPENAI_KEY")
        try:
            assert (await collect(provider))[-1].done
        finally:
            await provider.aclose()
        assert fake.authorizations == ["Bearer sk-test"]


# -- constrained output -----------------------------------------------------------------------


async def test_json_schema_spelling(fake: FakeOpenAI, provider: OpenAICompatProvider) -> None:
    await collect(provider, ChatOptions(json_schema=SCHEMA))
    assert fake.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }


async def test_auto_falls_back_to_json_object_once() -> None:
    """llama-cpp-python refuses ``json_schema`` (500); ``json_object`` + ``schema`` works."""
    with FakeOpenAI(models=[MODEL], json_schema=False) as fake:
        provider = make(fake.url)
        try:
            assert (await collect(provider, ChatOptions(json_schema=SCHEMA)))[-1].done
            assert (await collect(provider, ChatOptions(json_schema=SCHEMA)))[-1].done
        finally:
            await provider.aclose()
        types = [r["response_format"]["type"] for r in fake.requests]
        assert types == ["json_schema", "json_object", "json_object"]
        assert fake.requests[1]["response_format"]["schema"] == SCHEMA


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("json_schema", ServerError, id="forced-json_schema-fails"),
        pytest.param("json_object", None, id="forced-json_object-works"),
    ],
)
async def test_forced_json_mode(mode: JsonMode, expected: type[ModelError] | None) -> None:
    with FakeOpenAI(models=[MODEL], json_schema=False) as fake:
        provider = make(fake.url, json_mode=mode)
        try:
            if expected is None:
                assert (await collect(provider, ChatOptions(json_schema=SCHEMA)))[-1].done
            else:
                with pytest.raises(expected):
                    await collect(provider, ChatOptions(json_schema=SCHEMA))
        finally:
            await provider.aclose()
        assert len(fake.requests) == 1


# -- failures ---------------------------------------------------------------------------------

FAILURES = [
    pytest.param(Reply.http_error(401), Unavailable, 401, id="401-bad-key-is-not-busy"),
    pytest.param(Reply.http_error(429), Busy, 429, id="429-rate-limited-is-busy"),
    pytest.param(Reply.http_error(503), Busy, 503, id="503-llama.cpp-loading-is-busy"),
    pytest.param(Reply.http_error(500), ServerError, 500, id="500-is-a-server-error"),
    pytest.param(Reply.error_event(), StreamError, None, id="error-event-after-start"),
    pytest.param(Reply.error_event(after=0), StreamError, None, id="error-event-first"),
    pytest.param(Reply.malformed(), MalformedLine, None, id="data-line-not-json"),
    pytest.param(Reply.malformed(line="data: [1, 2]"), MalformedLine, None, id="data-not-object"),
    pytest.param(
        Reply.malformed(line='data: {"choices": {"0": 1}}'), MalformedLine, None, id="bad-shape"
    ),
    pytest.param(Reply.drop(), IncompleteStream, None, id="tcp-closed-mid-body"),
    pytest.param(Reply.truncated(), IncompleteStream, None, id="body-ends-without-done"),
    pytest.param(Reply.stall(seconds=30), GenerationTimeout, None, id="stall-hits-read-timeout"),
]


@pytest.mark.parametrize(("reply", "expected", "http_status"), FAILURES)
async def test_failure_becomes_our_error(
    fake: FakeOpenAI,
    provider: OpenAICompatProvider,
    reply: Reply,
    expected: type[ModelError],
    http_status: int | None,
) -> None:
    fake.enqueue(reply)
    received: list[Chunk] = []
    with pytest.raises(ModelError) as caught:
        await collect(provider, into=received)
    error = caught.value
    assert type(error) is expected
    assert (error.provider, error.model, error.http_status) == ("llamacpp", MODEL, http_status)
    assert not any(chunk.done for chunk in received)
    if http_status is not None:
        assert error.detail  # the body's message, not a bare status
        assert error.stage == "first_token"


async def test_unknown_model_is_model_not_found(fake: FakeOpenAI) -> None:
    """OpenAI's 404 says "does not exist"; its ``code`` says ``model_not_found``."""
    provider = make(fake.url, model="gpt-absent")
    try:
        with pytest.raises(ModelNotFound) as caught:
            await collect(provider)
    finally:
        await provider.aclose()
    assert caught.value.http_status == 404
    assert "gpt-absent" in caught.value.detail


async def test_refused_port_is_connection_refused() -> None:
    provider = make(unused_port_url())
    try:
        with pytest.raises(ConnectionRefused) as caught:
            await collect(provider)
    finally:
        await provider.aclose()
    assert caught.value.__cause__ is not None  # translated from httpx, not swallowed


# -- early close ------------------------------------------------------------------------------


async def test_aclose_disconnects(fake: FakeOpenAI, provider: OpenAICompatProvider) -> None:
    fake.enqueue(Reply.endless())
    stream = provider.stream(MESSAGES, ChatOptions())
    assert isinstance(stream, AsyncGenerator)
    first = [await anext(stream), await anext(stream)]
    assert all(chunk.text for chunk in first)
    await stream.aclose()
    assert await fake.wait_for_disconnect()


async def test_cancellation_disconnects(fake: FakeOpenAI, provider: OpenAICompatProvider) -> None:
    fake.enqueue(Reply.endless())
    received: list[Chunk] = []
    with anyio.move_on_after(0.3):
        await collect(provider, into=received)
    assert received
    assert await fake.wait_for_disconnect()


# -- health and warm-up -----------------------------------------------------------------------


async def test_health_ok(provider: OpenAICompatProvider) -> None:
    health = await provider.health()
    assert (health.reachable, health.model_present, health.model_loaded) == (True, True, True)
    assert health.ok


@pytest.mark.parametrize(
    ("models", "api_key", "reachable", "present"),
    [
        pytest.param(["other"], None, True, False, id="model-absent"),
        pytest.param([MODEL], "sk-other", True, False, id="401-reachable-but-unknown"),
    ],
)
async def test_health_reports_without_raising(
    models: list[str], api_key: str | None, reachable: bool, present: bool
) -> None:
    with FakeOpenAI(models=models, api_key=api_key) as fake:
        provider = make(fake.url)
        try:
            health = await provider.health()
        finally:
            await provider.aclose()
    assert (health.reachable, health.model_present, health.model_loaded) == (
        reachable,
        present,
        None,
    )
    assert health.checks["model_present"].startswith(("no", "unknown"))


async def test_health_on_refused_port() -> None:
    provider = make(unused_port_url())
    try:
        health = await provider.health()
    finally:
        await provider.aclose()
    assert (health.reachable, health.model_present, health.ok) == (False, False, False)
    assert health.checks["reachable"].startswith("no")


async def test_warm_up(fake: FakeOpenAI, provider: OpenAICompatProvider) -> None:
    await provider.warm_up()
    (body,) = fake.requests
    assert (body["max_tokens"], body["stream"], body["model"]) == (1, False, MODEL)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(Reply.http_error(503), Busy, id="loading"),
        pytest.param(Reply.http_error(500), ServerError, id="crashed"),
    ],
)
async def test_warm_up_errors(
    fake: FakeOpenAI, provider: OpenAICompatProvider, reply: Reply, expected: type[ModelError]
) -> None:
    fake.enqueue(reply)
    with pytest.raises(expected) as caught:
        await provider.warm_up()
    assert caught.value.stage == "warm_up"


async def test_warm_up_on_refused_port() -> None:
    provider = make(unused_port_url())
    try:
        with pytest.raises(ConnectionRefused) as caught:
            await provider.warm_up()
    finally:
        await provider.aclose()
    assert caught.value.stage == "warm_up"


# -- the SSE parser, line by line ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "events"),
    [
        pytest.param(["data: {}", ""], ["{}"], id="one-event"),
        pytest.param(["data:{}", ""], ["{}"], id="no-space-after-colon"),
        pytest.param(["data: a", "data: b", ""], ["a\nb"], id="multi-line-data-joined"),
        pytest.param([": ping - 2026", "", "data: x", ""], ["x"], id="comment-ignored"),
        pytest.param(["event: message", "id: 3", "retry: 10", "data: x", ""], ["x"], id="fields"),
        pytest.param(["", "", "data: [DONE]", ""], ["[DONE]"], id="blank-lines-alone"),
        pytest.param(["data: x"], [], id="unterminated-not-dispatched"),
    ],
)
def test_sse_parser(lines: list[str], events: list[str]) -> None:
    parser = _SSE()
    got = [data for line in lines if (data := parser.feed(line)) is not None]
    assert got == events
