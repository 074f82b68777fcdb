"""Overhead of the model layer: chat_turn versus calling the model server directly.

Two servers: the fake Ollama (fixed text, no delay: what is measured is our own work), and, with
``--real``, llama.cpp serving SmolLM2-135M through the OpenAI-compatible path. For each, the
median time of a whole turn through ``chat_turn`` (budgets, admission, prompt, streaming, masking,
contact rendering, validation, audit) minus that of a bare httpx stream of the same request,
and two first-token figures:

- forwarding: from the arrival of the chunk that lets the first text go (the provider hands it
  over) to the moment chat_turn yields that text as a delta: our own work on the path;
- first text: from the arrival of the first chunk with text to that first delta. It includes the
  holdback: a first word that could begin a number spelled out ("Un", "De"...) waits for the
  next chunk, which shows whether a number follows (one token interval of the model).

Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_llm.py [--turns 200] [--real]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from directory.snapshot import Directory
from llm.config import Budgets, ProviderConfig
from llm.prompting import PromptContact, build_payload
from llm.providers import OllamaProvider, OpenAICompatProvider, Provider
from llm.turn import Assistant, Delta, TurnRequest, chat_turn
from llm.types import ChatOptions, Chunk, Health, Message
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

BOOK = Directory.national_only()
CONTACTS = [PromptContact(c.id, c.name, c.description) for c in BOOK.contacts]
TEXT = "Bonjour, notez chaque épisode dans le journal : la date, l'heure et la durée. " * 4
QUESTION = "Mon voisin fait du bruit tous les soirs, que faire ?"


class Stopwatch:
    """Wraps a provider and notes when its first chunk, and its latest, are handed over."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.config = inner.config
        self.first_chunk_at: float | None = None
        self.last_chunk_at: float | None = None

    async def stream(
        self, messages: Sequence[Message], options: ChatOptions
    ) -> AsyncIterator[Chunk]:
        async for chunk in self.inner.stream(messages, options):
            if chunk.text:
                self.last_chunk_at = time.perf_counter()
                if self.first_chunk_at is None:
                    self.first_chunk_at = self.last_chunk_at
            yield chunk

    async def health(self) -> Health:
        return await self.inner.health()

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    async def aclose(self) -> None:
        await self.inner.aclose()


def _messages() -> list[dict[str, str]]:
    payload = build_payload(QUESTION, contacts=CONTACTS)
    return [m.as_dict() for m in payload.messages()]


async def direct_ollama(client: httpx.AsyncClient, model: str) -> float:
    start = time.perf_counter()
    body = {"model": model, "messages": _messages(), "stream": True}
    async with client.stream("POST", "/api/chat", json=body) as response:
        async for line in response.aiter_lines():
            if line and json.loads(line).get("done"):
                break
    return time.perf_counter() - start


async def direct_openai(client: httpx.AsyncClient, model: str, num_predict: int) -> float:
    start = time.perf_counter()
    body = {
        "model": model,
        "messages": _messages(),
        "stream": True,
        "max_tokens": num_predict,
        "temperature": 0.0,
        "seed": 1,
    }
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.strip() == "data: [DONE]":
                break
    return time.perf_counter() - start


async def through_layer(
    provider: Provider, budgets: Budgets, num_predict: int
) -> tuple[float, tuple[float, float] | None]:
    """The turn's duration, and (forwarding, first text) of its first delta."""
    watch = Stopwatch(provider)
    assistant = Assistant(
        provider=watch,
        budgets=budgets,
        book=lambda: BOOK,
        prompt_contacts=lambda category, topics: CONTACTS,
        options=ChatOptions(num_predict=num_predict, temperature=0.0, seed=1),
    )
    start = time.perf_counter()
    first: tuple[float, float] | None = None
    async for event in chat_turn(assistant, TurnRequest(QUESTION)):
        if isinstance(event, Delta) and first is None:
            now = time.perf_counter()
            if watch.first_chunk_at is not None and watch.last_chunk_at is not None:
                first = (now - watch.last_chunk_at, now - watch.first_chunk_at)
    total = time.perf_counter() - start
    return total, first


def _report(
    label: str, direct: list[float], layer: list[float], firsts: list[tuple[float, float]]
) -> None:
    d, lyr = statistics.median(direct) * 1000, statistics.median(layer) * 1000
    print(f"{label}:")
    print(f"  direct stream median {d:.2f} ms; through chat_turn median {lyr:.2f} ms")
    print(f"  added per turn (median difference): {lyr - d:.2f} ms")
    for name, values in (
        ("first-token forwarding", sorted(f for f, _ in firsts)),
        ("first text (with holdback)", sorted(t for _, t in firsts)),
    ):
        if values:
            print(
                f"  {name}: median {statistics.median(values) * 1000:.3f} ms, "
                f"p99 {values[int(0.99 * (len(values) - 1))] * 1000:.3f} ms"
            )


async def bench_fake(turns: int) -> None:
    budgets = Budgets(loop_repeats=1000)
    with FakeOllama(
        models=[DEFAULT_MODEL], loaded=True, default=Behaviour.normal(TEXT, chunk_size=4)
    ) as fake:
        provider = OllamaProvider(ProviderConfig(base_url=fake.url, model=DEFAULT_MODEL), budgets)
        async with httpx.AsyncClient(base_url=fake.url, timeout=30) as client:
            for _ in range(20):
                await direct_ollama(client, DEFAULT_MODEL)
                await through_layer(provider, budgets, 400)
            direct, layer, firsts = [], [], []
            for _ in range(turns):  # interleaved, so that drift affects both alike
                direct.append(await direct_ollama(client, DEFAULT_MODEL))
                total, through = await through_layer(provider, budgets, 400)
                layer.append(total)
                if through is not None:
                    firsts.append(through)
        await provider.aclose()
    chunks = len(TEXT) // 4 + 1
    _report(f"fake Ollama ({chunks} chunks, no delay), {turns} turns", direct, layer, firsts)


async def bench_real(turns: int) -> None:
    from tests.real_model import start_llama_server

    budgets = Budgets(first_token_s=120, total_s=240, idle_s=60, loop_repeats=1000)
    with start_llama_server() as url:
        config = ProviderConfig(type="openai_compat", base_url=url, model="smollm2")
        provider = OpenAICompatProvider(config, budgets)
        async with httpx.AsyncClient(base_url=url, timeout=240) as client:
            await direct_openai(client, "smollm2", 32)
            await through_layer(provider, budgets, 32)
            direct, layer, firsts = [], [], []
            for _ in range(turns):
                direct.append(await direct_openai(client, "smollm2", 32))
                total, through = await through_layer(provider, budgets, 32)
                layer.append(total)
                if through is not None:
                    firsts.append(through)
        await provider.aclose()
    _report(f"llama.cpp + SmolLM2-135M (32 tokens), {turns} turns", direct, layer, firsts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--real", action="store_true", help="also llama.cpp with SmolLM2-135M")
    parser.add_argument("--real-turns", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(bench_fake(args.turns))
    if args.real:
        asyncio.run(bench_real(args.real_turns))


if __name__ == "__main__":
    main()
