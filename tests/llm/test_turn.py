"""chat_turn against the fake Ollama: every model-server behaviour, its status, its fallback.

This is the fault table of the model layer: one row per behaviour, the reply's status and
source, and for each failure a fallback that ends with the 112 line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

import pytest

from directory.snapshot import Directory
from llm.admission import LocalSlots, Quotas
from llm.config import Budgets, ProviderConfig
from llm.fallback import EMERGENCY_LINE
from llm.prompting import PromptContact
from llm.providers import NoProvider, OllamaProvider
from llm.turn import Assistant, Delta, TurnRequest, TurnResult, chat_turn
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama, unused_port_url

pytestmark = pytest.mark.anyio
BUDGETS = Budgets(
    connect_s=1.0, first_token_s=1.0, idle_s=0.5, total_s=3.0, retries=0, loop_repeats=10
)  # fmt: skip
BOOK = Directory.national_only()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


def _contacts(category: str, topics: Sequence[str]) -> list[PromptContact]:
    return [PromptContact(c.id, c.name, c.description) for c in BOOK.contacts]


def _assistant(url: str, **changes: object) -> Assistant:
    config = ProviderConfig(base_url=url, model=DEFAULT_MODEL)
    values: dict[str, object] = {
        "provider": OllamaProvider(config, BUDGETS),
        "budgets": BUDGETS,
        "book": lambda: BOOK,
        "prompt_contacts": _contacts,
    }
    values.update(changes)
    return Assistant(**values)  # type: ignore[arg-type]


async def _run(assistant: Assistant, request: TurnRequest) -> tuple[list[str], TurnResult]:
    deltas: list[str] = []
    result: TurnResult | None = None
    async for event in chat_turn(assistant, request):
        if isinstance(event, Delta):
            deltas.append(event.text)
        else:
            result = event
    assert result is not None
    return deltas, result


def _saw_disconnect(fake: FakeOllama, before: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if fake.disconnects > before:
            return True
        time.sleep(0.01)
    return False


GAS = TurnRequest("ça pue le gaz", category="danger", topics=("gaz",))
NOISE = TurnRequest("le voisin fait du bruit la nuit")

FAULTS = [
    # behaviour, status, closed by us (the fake must see the disconnect)
    pytest.param(Behaviour.slow_first_byte(3.0), "timeout", True, id="slow first byte"),
    pytest.param(Behaviour.stall(after_chunks=2, seconds=3.0), "timeout", True, id="stall"),
    pytest.param(Behaviour.drop(after_chunks=2), "unavailable", False, id="dropped"),
    pytest.param(Behaviour.error_line(after_chunks=2), "unavailable", False, id="error line"),
    pytest.param(Behaviour.not_found("single_quotes"), "unavailable", False, id="404 model 'x'"),
    pytest.param(Behaviour.not_found("double_quotes"), "unavailable", False, id='404 model "x"'),
    pytest.param(Behaviour.busy(), "busy", False, id="503"),
    pytest.param(Behaviour.server_error(), "unavailable", False, id="500"),
    pytest.param(Behaviour.malformed(after_chunks=2), "unavailable", False, id="malformed line"),
    pytest.param(Behaviour.endless(delay=0.0), "invalid_output", True, id="endless"),
]


async def test_normal_answer_is_masked_and_rendered(fake: FakeOllama) -> None:
    fake.enqueue(
        Behaviour.normal(
            "Appelez [[pompiers]] ou le 06 12 34 56 78, puis notez tout.", chunk_size=3
        )
    )
    deltas, result = await _run(_assistant(fake.url), GAS)
    assert (result.source, result.status) == ("llm", "ok")
    assert result.text == "".join(deltas)
    assert "Sapeurs-pompiers (18)" in result.text  # the number from the directory
    assert "06 12 34 56 78" not in result.text  # a number the model wrote: masked
    assert "[numéro masqué]" in result.text
    assert result.contacts == ("pompiers",)
    assert result.unknown_tags == ()
    assert result.timings.first_token_ms is not None
    assert result.timings.tokens is not None


async def test_invalid_answer_is_retried_once_with_its_errors(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal("Voyez [[conciliateur]] sur https://exemple.fr"))
    fake.enqueue(Behaviour.normal("Notez chaque épisode dans le journal, puis écrivez au syndic."))
    deltas, result = await _run(_assistant(fake.url), NOISE)
    assert (result.source, result.status) == ("llm", "ok")
    assert result.text == "Notez chaque épisode dans le journal, puis écrivez au syndic."
    assert result.partial_discarded  # the first answer was streamed as a preview
    assert "".join(deltas).startswith("Voyez")
    retry = fake.requests[-1]["messages"]
    assert retry[-2] == {
        "role": "assistant",
        "content": "Voyez [[conciliateur]] sur https://exemple.fr",
    }
    assert "Identifiants inconnus : conciliateur" in retry[-1]["content"]
    assert "lien web" in retry[-1]["content"]


async def test_invalid_twice_gives_the_fallback(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal("<b>gras</b>"))
    fake.enqueue(Behaviour.normal("<i>encore</i>"))
    _, result = await _run(_assistant(fake.url), NOISE)
    assert (result.source, result.status) == ("fallback", "invalid_output")
    assert result.text.endswith(EMERGENCY_LINE)


@pytest.mark.parametrize(("behaviour", "status", "closed_by_us"), FAULTS)
async def test_every_fault_gives_its_status_and_a_fallback(
    fake: FakeOllama, behaviour: Behaviour, status: str, closed_by_us: bool
) -> None:
    before = fake.disconnects
    fake.enqueue(behaviour)
    deltas, result = await _run(_assistant(fake.url), GAS)
    assert (result.source, result.status) == ("fallback", status)
    assert result.text.endswith(EMERGENCY_LINE)
    assert "Ne touchez à aucun interrupteur" in result.text  # the gas steps, with a card
    assert "les pompiers (18)" in result.text  # numbers from the directory
    assert result.error is not None
    if result.partial_discarded:
        assert result.text not in "".join(deltas)
    else:
        assert deltas[-1] == result.text
    if closed_by_us:
        assert _saw_disconnect(fake, before)


async def test_refused_connection_is_unavailable() -> None:
    _, result = await _run(_assistant(unused_port_url()), NOISE)
    assert (result.source, result.status) == ("fallback", "unavailable")
    assert result.text.endswith(EMERGENCY_LINE)
    assert "numéros utiles" not in result.text  # no card was shown for a plain nuisance


async def test_none_provider_is_disabled() -> None:
    assistant = _assistant("http://127.0.0.1:1", provider=NoProvider(ProviderConfig(type="none")))
    _, result = await _run(assistant, GAS)
    assert (result.source, result.status) == ("fallback", "disabled")
    assert result.text.endswith(EMERGENCY_LINE)


class _Counter:
    def __init__(self, device: int, everyone: int) -> None:
        self.counts = (device, everyone)

    async def today(self, device_id: str | None) -> tuple[int, int]:
        return self.counts


@pytest.mark.parametrize(
    ("counts", "status"),
    [
        pytest.param((5, 5), "quota", id="device quota reached"),
        pytest.param((0, 10), "quota", id="global quota reached"),
        pytest.param((4, 9), "ok", id="below both"),
    ],
)
async def test_quotas(fake: FakeOllama, counts: tuple[int, int], status: str) -> None:
    assistant = _assistant(
        fake.url, quotas=Quotas(per_device=5, global_=10), quota_counter=_Counter(*counts)
    )
    request = TurnRequest("une question", device_id="phone-1")
    _, result = await _run(assistant, request)
    assert result.status == status


async def test_busy_when_the_slot_is_taken_and_the_queue_full(fake: FakeOllama) -> None:
    slots = LocalSlots(parallel=1, max_waiting=0, wait_s=0.1)
    assistant = _assistant(fake.url, slots=slots)
    fake.enqueue(Behaviour.normal("lente", chunk_size=1, delay=0.1))
    first = asyncio.create_task(_run(assistant, NOISE))
    await asyncio.sleep(0.05)
    _, second = await _run(assistant, NOISE)
    assert (second.source, second.status) == ("fallback", "busy")
    assert (await first)[1].status == "ok"


async def test_busy_after_waiting_too_long(fake: FakeOllama) -> None:
    slots = LocalSlots(parallel=1, max_waiting=2, wait_s=0.1)
    assistant = _assistant(fake.url, slots=slots)
    fake.enqueue(Behaviour.normal("une réponse lente", chunk_size=1, delay=0.05))
    first = asyncio.create_task(_run(assistant, NOISE))
    await asyncio.sleep(0.05)
    _, second = await _run(assistant, NOISE)
    assert second.status == "busy"
    assert second.timings.queue_wait_ms is None
    await first


async def test_cancelling_the_turn_closes_the_upstream(fake: FakeOllama) -> None:
    before = fake.disconnects
    fake.enqueue(Behaviour.endless(chunk="mot ", delay=0.02))
    assistant = _assistant(fake.url, budgets=BUDGETS.model_copy(update={"loop_repeats": 1000}))

    async def consume() -> None:
        await _run(assistant, NOISE)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _saw_disconnect(fake, before)


async def test_a_model_server_that_is_down_hands_the_turn_to_the_next(fake: FakeOllama) -> None:
    down = OllamaProvider(ProviderConfig(base_url=unused_port_url(), model=DEFAULT_MODEL), BUDGETS)
    up = OllamaProvider(ProviderConfig(base_url=fake.url, model=DEFAULT_MODEL), BUDGETS)
    slots = LocalSlots([1, 1], max_waiting=0, wait_s=0)
    assistant = _assistant(fake.url, provider=down, servers=[down, up], slots=slots)
    fake.enqueue(Behaviour.normal("Notez la date de chaque épisode.", chunk_size=4))
    _, result = await _run(assistant, NOISE)
    assert (result.source, result.status) == ("llm", "ok")
    assert "Notez la date" in result.text
    # The server found down is the second choice from now on, while the other one is free.
    async with slots.slot() as grant:
        assert grant.server == 1


async def test_every_server_down_gives_the_fallback(fake: FakeOllama) -> None:
    servers = [
        OllamaProvider(ProviderConfig(base_url=unused_port_url(), model=DEFAULT_MODEL), BUDGETS)
        for _ in range(2)
    ]
    assistant = _assistant(fake.url, provider=servers[0], servers=servers, slots=LocalSlots([1, 1]))
    _, result = await _run(assistant, NOISE)
    assert (result.source, result.status) == ("fallback", "unavailable")
