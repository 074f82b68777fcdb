"""``chat_turn``: one turn of steps 4 to 8 of DESIGN.md, with no HTTP in sight.

It yields ``Delta`` events (text already post-processed: markup, links and URIs removed,
numbers masked, contacts rendered with the directory's numbers) and ends with exactly one
``TurnResult``, whatever happens:

- no model configured → fallback, status ``disabled``; quota reached → ``quota``;
- the flow policy refuses the send, or the leak scan finds an identifier → ``blocked_policy``;
- a valid cached answer for the same pseudonymised request → source ``cache``;
- no slot in time → ``busy``; the provider fails, times out or loops → its error's status;
- the answer fails validation → one retry with the list of errors when the time budget
  allows, then ``invalid_output``.

Deltas stream as the model writes, except when the payload was pseudonymised: then the answer
is held until validated and re-identified. The ``TurnResult`` text is authoritative: when it
differs from deltas already sent (a failure, a retry), ``partial_discarded`` is set and the
client shows the result instead. When the caller stops iterating (a client disconnect cancels
the task), the upstream connection is closed so the model server stops generating. Every
model call leaves one line in the audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from llm.admission import LocalSlots, QuotaCounter, Quotas, Slots
from llm.audit import AuditLog
from llm.audit_scrub import scrub
from llm.cache import AnswerCache, cache_key
from llm.config import Budgets
from llm.errors import ConnectionRefused, GenerationTimeout, HostNotFound, ModelError
from llm.fallback import FallbackStatus, fallback_text
from llm.generation import Generation, generate, remaining_budget
from llm.leakscan import scan
from llm.payload import Payload
from llm.policy import Decision, PolicyConfig, decide
from llm.prompting import PromptContact, build_payload
from llm.providers.base import Provider
from llm.providers.none import NoProvider
from llm.pseudonymize import PseudonymizeConfig, Pseudonymizer, placeholders
from llm.texts import prompt_hash
from llm.types import ChatOptions, Message
from llm.validate import OutputContract, validate
from safety.contacts import ContactBook, StreamRenderer, render_contacts
from safety.markup import StreamSanitizer, sanitize
from safety.masking import StreamMasker, mask_numbers

__all__ = [
    "Assistant",
    "Delta",
    "Harness",
    "Timings",
    "TurnRequest",
    "TurnResult",
    "chat_turn",
]

Source = Literal["llm", "cache", "fallback"]
Status = Literal[
    "ok", "timeout", "busy", "quota", "unavailable", "invalid_output", "blocked_policy", "disabled"
]
RETRY_INSTRUCTION = (
    "Ta réponse ne respecte pas ces règles : {errors} Réécris-la entièrement en les respectant."
)


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Timings:
    queue_wait_ms: float | None = None
    first_token_ms: float | None = None
    total_ms: float = 0.0
    tokens: int | None = None
    tokens_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    text: str
    source: Source
    status: Status
    contacts: tuple[str, ...]  # ids the answer named, in order
    model: str | None
    prompt_hash: str
    timings: Timings
    partial_discarded: bool = False
    unknown_tags: tuple[str, ...] = ()
    error: dict[str, str | int | None] | None = None
    model_called: bool = False
    masked_numbers: int = 0  # numbers the model wrote that were masked in ``text``
    markup_removed: int = 0  # tags, links, URIs and code fences removed from ``text``


@dataclass(frozen=True, slots=True)
class TurnRequest:
    text: str
    category: str = "rien"
    topics: tuple[str, ...] = ()
    device_id: str | None = None
    history: Sequence[Message] = ()
    request_id: str | None = None
    quota_counts: tuple[int, int] | None = None  # counted by the caller already, if given
    # Keyed hashes the server computes (never the raw ids): "device" scopes the answer cache,
    # "conversation" tags cache entries and audit lines so that an erasure finds them.
    tags: Mapping[str, str] = field(default_factory=dict)
    # Entered around waiting for a model slot and generating: the server lets other turns'
    # work go meanwhile (``server.turn_gate``).
    around_model: Callable[[], AbstractAsyncContextManager[None]] | None = None


@dataclass
class Harness:
    """What guards a model call: policy, pseudonymisation, validation, cache, audit."""

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    pseudonymize: PseudonymizeConfig = field(default_factory=PseudonymizeConfig)
    contract: OutputContract = field(default_factory=OutputContract)
    cache: AnswerCache | None = None
    audit: AuditLog = field(default_factory=lambda: AuditLog(None))


@dataclass
class Assistant:
    """The long-lived parts a turn needs; the server builds one at start-up."""

    provider: Provider
    budgets: Budgets
    book: Callable[[], ContactBook]  # the current directory snapshot
    prompt_contacts: Callable[[str, Sequence[str]], Sequence[PromptContact]]
    slots: Slots = field(default_factory=LocalSlots)
    quotas: Quotas = field(default_factory=Quotas)
    quota_counter: QuotaCounter | None = None
    options: ChatOptions = field(default_factory=ChatOptions)
    harness: Harness = field(default_factory=Harness)
    style: Literal["inline", "name"] = "inline"
    # One provider per model server, in the order of the slots' servers (the same model on
    # each); empty: ``provider`` is the only one.
    servers: Sequence[Provider] = ()

    def on(self, server: int) -> Provider:
        """The provider of one model server (an index of ``Grant.server``)."""
        return self.servers[server] if self.servers else self.provider

    @property
    def server_count(self) -> int:
        return len(self.servers) or 1


class _Failover(Exception):
    """A model server could not be reached before anything was generated: try another."""

    def __init__(self, server: int, error: ModelError) -> None:
        super().__init__(error.status)
        self.server = server
        self.error = error


def _server_down(error: ModelError) -> bool:
    """An error that says the server itself is away (not the model, not the request)."""
    return isinstance(error, (ConnectionRefused, HostNotFound)) or (
        isinstance(error, GenerationTimeout) and error.kind == "connect"
    )


class _Counted:
    """Quota counts the caller read already (with the rest of the turn's storage)."""

    def __init__(self, counts: tuple[int, int]) -> None:
        self._counts = counts

    async def today(self, device_id: str | None) -> tuple[int, int]:
        return self._counts


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


@dataclass
class _Turn:
    """The state of one turn as it goes (not shared)."""

    assistant: Assistant
    request: TurnRequest
    started: float = field(default_factory=time.perf_counter)
    pseudo: Pseudonymizer = field(default_factory=Pseudonymizer)
    decision: Decision | None = None
    raw_payload: Payload | None = None
    _pseudonymised_payload: Payload | None = None
    queue_wait_ms: float | None = None
    sent: list[str] = field(default_factory=list)
    model_called: bool = False

    def fallback(self, status: FallbackStatus, error: ModelError | None = None) -> TurnResult:
        raw = fallback_text(status, category=self.request.category, topics=self.request.topics)
        rendered = render_contacts(raw, self.assistant.book(), self.assistant.style)
        return TurnResult(
            text=rendered.text,
            source="fallback",
            status=status,
            contacts=rendered.contacts,
            model=None if status == "disabled" else self.assistant.provider.config.model,
            prompt_hash=prompt_hash(),
            timings=Timings(queue_wait_ms=self.queue_wait_ms, total_ms=_ms(self.started)),
            partial_discarded=bool(self.sent),
            error=error.audit() if error is not None else None,
            model_called=self.model_called,
        )

    def audit(self, **fields: Any) -> None:
        """One audit line: pseudonymised text, scrubbed again by the audit's own scan."""
        config = self.assistant.provider.config
        scrubbed: dict[str, int] = {}
        entry: dict[str, Any] = {
            "request_id": self.request.request_id,
            "device": self.request.tags.get("device"),
            "conversation": self.request.tags.get("conversation"),
            "message_chars": len(self.request.text),
            "provider": config.name,
            "provider_type": config.type,
            "model": config.model,
            "prompt_hash": prompt_hash(),
            "category": self.request.category,
            "topics": list(self.request.topics),
            "decision": self.decision.audit() if self.decision else None,
            "payload": self._audit_elements(scrubbed) if self.raw_payload else None,
        }
        entry.update(fields)
        if "answer" in entry and isinstance(entry["answer"], str):
            # What the model wrote may echo what it was told: the same tokens, numbers masked.
            answer = mask_numbers(self.pseudo.pseudonymize(entry["answer"])).text
            entry["answer_chars"] = len(entry["answer"])
            entry["answer"] = _scrubbed(answer, scrubbed)
        entry["scrubbed"] = scrubbed
        self.assistant.harness.audit.record(entry)

    def _audit_elements(self, scrubbed: dict[str, int]) -> list[dict[str, Any]]:
        """The payload's elements; what people wrote (user text, history) pseudonymised with
        every kind on, whatever the deployment sends, then scrubbed; the rest as sent."""
        assert self.raw_payload is not None  # noqa: S101 - checked by the caller
        pseudo = _audit_pseudonymizer(self.pseudo)
        elements = []
        for element in self.raw_payload.elements:
            content = element.content
            if element.data_class in ("user_text", "pseudonym"):
                content = _scrubbed(pseudo.pseudonymize(content), scrubbed)
            elements.append(
                {
                    "name": element.name,
                    "role": element.role,
                    "class": element.data_class,
                    "chars": len(element.content),
                    "content": content,
                }
            )
        return elements

    def audit_payload(self) -> Payload:
        """The payload pseudonymised (what the audit log and the cache key see), computed
        once, on first need: a turn refused at admission never pays for it."""
        if self._pseudonymised_payload is None:
            assert self.raw_payload is not None  # noqa: S101 - set before any use
            self._pseudonymised_payload = _pseudonymised(self.raw_payload, self.pseudo)
        return self._pseudonymised_payload

    def known_contact(self, contact_id: str) -> bool:
        return self.assistant.book().get(contact_id) is not None


def _audit_pseudonymizer(pseudo: Pseudonymizer) -> Pseudonymizer:
    """The turn's mapping (same tokens as the cache key and the answer), every kind on."""
    if pseudo.config == PseudonymizeConfig():
        return pseudo
    return Pseudonymizer(PseudonymizeConfig(), dict(pseudo.forward), dict(pseudo.reverse))


def _scrubbed(text: str, found: dict[str, int]) -> str:
    clean, kinds = scrub(text)
    for kind, count in kinds.items():
        found[kind] = found.get(kind, 0) + count
    return clean


def _placeholder_errors(answer: str, pseudo: Pseudonymizer) -> list[str]:
    """A placeholder the request did not give (an invented ``PERS-2``, a ``[téléphone-1]``
    from nowhere) would reach the person as is: the answer is invalid."""
    unknown = [token for token in placeholders(answer) if token not in pseudo.reverse]
    if not unknown:
        return []
    return [
        "La réponse contient des identifiants de remplacement qui ne correspondent à rien "
        f"({', '.join(sorted(set(unknown)))}) : écris sans eux."
    ]


def _pseudonymised(payload: Payload, pseudo: Pseudonymizer) -> Payload:
    return payload.with_contents(
        [
            pseudo.pseudonymize(e.content) if e.data_class == "user_text" else e.content
            for e in payload.elements
        ]
    )


@dataclass(frozen=True, slots=True)
class _Cleaned:
    """What post-processing takes out of one answer: for its audit line and the metrics."""

    markup_removed: int
    masked_numbers: int

    @classmethod
    def of(cls, raw: str) -> _Cleaned:
        clean = sanitize(raw)
        return cls(clean.removed, len(mask_numbers(clean.text).spans))

    def audit(self) -> dict[str, int]:
        return {"markup_removed": self.markup_removed, "masked_numbers": self.masked_numbers}


def _errors(answer: str, turn: _Turn) -> list[str]:
    """The contract's errors, and placeholders this request cannot put words back into."""
    contract = turn.assistant.harness.contract
    return validate(answer, turn.known_contact, contract) + _placeholder_errors(answer, turn.pseudo)


def _post_process(text: str, turn: _Turn) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Markup and links removed, numbers masked, then contacts rendered with the directory's
    numbers (one shot; ``_generate`` does the same as the model streams)."""
    clean = mask_numbers(sanitize(text).text).text
    rendered = render_contacts(clean, turn.assistant.book(), turn.assistant.style)
    return rendered.text, rendered.contacts, rendered.unknown_tags


async def chat_turn(
    assistant: Assistant, request: TurnRequest
) -> AsyncGenerator[Delta | TurnResult, None]:
    """Deltas, then one ``TurnResult``; never raises a model error."""
    turn = _Turn(assistant, request)
    outcome = _run(turn)
    async with contextlib.aclosing(outcome):
        async for event in outcome:
            if isinstance(event, TurnResult) and event.source == "fallback" and not turn.sent:
                yield Delta(event.text)  # a fallback with nothing before it streams whole
            yield event


async def _run(turn: _Turn) -> AsyncGenerator[Delta | TurnResult, None]:
    assistant, request = turn.assistant, turn.request
    harness = assistant.harness
    if isinstance(assistant.provider, NoProvider):
        yield turn.fallback("disabled")
        return
    try:
        counter = (
            _Counted(request.quota_counts)
            if request.quota_counts is not None
            else assistant.quota_counter
        )
        await assistant.quotas.check(counter, request.device_id)
    except ModelError as error:
        yield turn.fallback("quota", error)
        return

    raw_payload = build_payload(
        request.text,
        category=request.category,
        topics=request.topics,
        contacts=assistant.prompt_contacts(request.category, request.topics),
        history=request.history,
    )
    turn.pseudo = Pseudonymizer(harness.pseudonymize)
    turn.raw_payload = raw_payload
    turn.decision = decide(assistant.provider.config, raw_payload.elements, harness.policy)
    if not turn.decision.allowed:
        turn.audit(status="blocked_policy", source="fallback")
        yield turn.fallback("blocked_policy")
        return
    send = turn.audit_payload() if turn.decision.pseudonymise else raw_payload
    if turn.decision.leak_scan:
        raw_texts = [e.content for e in raw_payload.elements if e.data_class == "user_text"]
        report = scan([e.content for e in send.elements], raw_texts, turn.pseudo.originals)
        if not report.clean:
            turn.audit(status="blocked_policy", source="fallback", leak=report.audit())
            yield turn.fallback("blocked_policy")
            return

    model = assistant.provider.config.model
    cache = harness.cache
    scope = request.tags.get("device", request.device_id or "")
    key = cache_key(turn.audit_payload().serialized(), model, prompt_hash(), scope) if cache else ""
    if cache is not None:
        found = cache.lookup(key, lambda answer: _errors(answer, turn))
        if found.entry is not None:
            text, contacts, unknown = _post_process(
                turn.pseudo.reidentify(found.entry.answer), turn
            )
            turn.audit(status="ok", source="cache", cache=found.outcome)
            yield TurnResult(
                text, "cache", "ok", contacts, model, prompt_hash(),
                Timings(total_ms=_ms(turn.started)), unknown_tags=unknown,
            )  # fmt: skip
            return

    async for event in _generate(turn, send, key):
        yield event


async def _generate(
    turn: _Turn, send: Payload, key: str
) -> AsyncGenerator[Delta | TurnResult, None]:
    """The model's answer, from the first server with a free slot; a server that cannot be
    reached is marked down and the next one tried, while nothing was sent yet."""
    assistant = turn.assistant
    tried: frozenset[int] = frozenset()
    while True:
        try:
            attempt = _attempt(turn, send, key, tried)
            async with contextlib.aclosing(attempt):
                async for event in attempt:
                    yield event
            return
        except _Failover as failover:
            tried |= {failover.server}
            if len(tried) >= assistant.server_count:
                yield turn.fallback(failover.error.status, failover.error)
                return


async def _attempt(
    turn: _Turn, send: Payload, key: str, tried: frozenset[int]
) -> AsyncGenerator[Delta | TurnResult, None]:
    assistant = turn.assistant
    harness = assistant.harness
    assert turn.decision is not None  # noqa: S101 - set by _run before
    streaming = not turn.decision.pseudonymise
    messages = send.messages()
    sanitizer, masker = StreamSanitizer(), StreamMasker()
    renderer = StreamRenderer(assistant.book(), assistant.style)
    first = Generation()
    try:
        around = turn.request.around_model or contextlib.nullcontext
        async with around(), assistant.slots.slot(turn.request.device_id, tried) as grant:
            turn.queue_wait_ms = round(grant.waited_s * 1000, 2)
            turn.model_called = True
            provider = assistant.on(grant.server)
            pieces = generate(provider, messages, assistant.options, assistant.budgets, first)
            try:
                async with contextlib.aclosing(pieces):
                    async for piece in pieces:
                        if streaming and (out := renderer.feed(masker.feed(sanitizer.feed(piece)))):
                            turn.sent.append(out)
                            yield Delta(out)
            except ModelError as error:
                if _server_down(error) and not turn.sent and not first.raw:
                    assistant.slots.mark(grant.server, False)
                    if len(tried) + 1 < assistant.server_count:
                        turn.audit(attempt=1, answer="", status=error.status, error=error.audit())
                        raise _Failover(grant.server, error) from error
                raise
            assistant.slots.mark(grant.server, True)
            tail = ""
            if streaming:
                rest = masker.feed(sanitizer.close()) + masker.close()
                tail = renderer.feed(rest) + renderer.close()
            if tail:
                turn.sent.append(tail)
                yield Delta(tail)
            errors = _errors(first.raw, turn)
            turn.audit(
                attempt=1,
                answer=first.raw,
                **_Cleaned.of(first.raw).audit(),
                validation=errors,
                status="invalid_output" if errors else "ok",
                timings={"first_token_ms": first.first_token_ms, "total_ms": first.total_ms},
            )
            final: Generation | None = first
            if errors:
                final = await _retry(turn, provider, messages, first, errors)
    except ModelError as error:
        if error.stage != "admission":  # a refused slot is not a model call
            turn.audit(attempt=1, answer=first.raw, status=error.status, error=error.audit())
        yield turn.fallback(error.status, error)
        return
    except asyncio.CancelledError:
        raise
    if final is None:
        yield turn.fallback("invalid_output")
        return

    cached = turn.pseudo.pseudonymize(final.raw) if harness.cache is not None and key else ""
    # Only an answer whose placeholders all stand for words of the request can be reused: a
    # name the model brought in would become a token no later request can put words back in.
    if cached and set(placeholders(cached)) <= set(placeholders(turn.audit_payload().serialized())):
        assert harness.cache is not None  # noqa: S101 - checked with ``cached``
        harness.cache.store(
            key,
            cached,
            assistant.provider.config.model,
            prompt_hash(),
            turn.request.tags.get("conversation", ""),
        )
    if streaming and final is first:
        text = "".join(turn.sent)
        contacts, unknown = renderer.contacts, renderer.unknown_tags
    else:
        raw = turn.pseudo.reidentify(final.raw) if turn.decision.pseudonymise else final.raw
        text, contacts, unknown = _post_process(raw, turn)
    stats = final.stats
    cleaned = _Cleaned.of(final.raw)
    yield TurnResult(
        text=text,
        source="llm",
        status="ok",
        contacts=contacts,
        model=assistant.provider.config.model,
        prompt_hash=prompt_hash(),
        timings=Timings(
            queue_wait_ms=turn.queue_wait_ms,
            first_token_ms=first.first_token_ms,
            total_ms=_ms(turn.started),
            tokens=stats.eval_count if stats else None,
            tokens_per_second=round(stats.tokens_per_second, 2)
            if stats and stats.tokens_per_second
            else None,
        ),
        partial_discarded=bool(turn.sent) and final is not first,
        unknown_tags=unknown,
        model_called=True,
        markup_removed=cleaned.markup_removed,
        masked_numbers=cleaned.masked_numbers,
    )


async def _retry(
    turn: _Turn,
    provider: Provider,
    messages: list[Message],
    first: Generation,
    errors: list[str],
) -> Generation | None:
    """One more try with the list of errors, when the turn's time budget allows it."""
    assistant = turn.assistant
    budgets = remaining_budget(assistant.budgets, _ms(turn.started))
    if budgets is None:
        return None
    follow_up = [
        *messages,
        Message("assistant", first.raw),
        Message("user", RETRY_INSTRUCTION.format(errors=" ".join(errors))),
    ]
    second = Generation()
    try:
        pieces = generate(provider, follow_up, assistant.options, budgets, second)
        async with contextlib.aclosing(pieces):
            async for _ in pieces:
                pass
    except ModelError as error:
        turn.audit(attempt=2, answer=second.raw, status=error.status, error=error.audit())
        return None
    again = _errors(second.raw, turn)
    turn.audit(
        attempt=2,
        answer=second.raw,
        **_Cleaned.of(second.raw).audit(),
        validation=again,
        status="ok" if not again else "invalid_output",
    )
    return None if again else second
