"""The judge's pass over every answer: cache and journal first, calls under budgets, retries.

``Grader.grade`` asks the judge only for what the journal (and the shared cache) do not hold
yet; an error already journaled is kept unless errors are retried (``retry_errors`` rounds,
each asking again only the keys whose last outcome is an error; after a timeout, with the
generous budgets). At most ``parallel`` calls run at once: never more than the judge server's
slots, or the calls queue there and time out for nothing. Each call is journaled as it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from bench.identity import ModelIdentity
from bench.journal import Journal, JournalEntry, VerdictCache
from bench.judge import CallTimings, JudgeConfig, call_judge
from bench.pacing import Pacer, format_duration
from bench.progress import Display
from bench.rubric import Case
from bench.scenario import Scenario
from llm.providers.base import Provider
from llm.types import Message

__all__ = ["CriterionOutcome", "GradeItem", "Grader", "outcomes_for"]

Outcome = Literal["PASS", "FAIL", "ERROR"]


@dataclass(frozen=True)
class GradeItem:
    """One answer to grade (``case`` is None when there was no answer to grade)."""

    kind: Literal["scenario", "calibration"]
    name: str
    scenario: Scenario
    repeat: int
    case: Case | None
    key: str | None
    messages: tuple[Message, ...] = ()
    no_answer: str | None = None  # why there is no case


@dataclass(frozen=True)
class CriterionOutcome:
    criterion: str
    outcome: Outcome
    error_kind: str | None = None  # timeout | transport | parse | no_answer | not_run
    cause: str | None = None
    reason: str | None = None


def outcomes_for(item: GradeItem, entry: JournalEntry | None) -> list[CriterionOutcome]:
    """The outcome of each criterion of ``item``: a verdict, or ERROR with its cause."""
    criteria = item.scenario.criteria
    if item.case is None:
        cause = item.no_answer or "no answer"
        return [CriterionOutcome(c, "ERROR", "no_answer", cause) for c in criteria]
    if entry is None:
        return [CriterionOutcome(c, "ERROR", "not_run", "never asked") for c in criteria]
    if entry.outcome == "error" or entry.verdicts is None:
        return [CriterionOutcome(c, "ERROR", entry.error_kind, entry.cause) for c in criteria]
    verdicts = entry.verdicts
    return [CriterionOutcome(c, verdicts[c].verdict, reason=verdicts[c].raison) for c in criteria]


@dataclass
class Grader:
    provider: Provider
    config: JudgeConfig
    identity: ModelIdentity
    rubric_hash: str
    journal: Journal
    cache: VerdictCache
    pacer: Pacer
    parallel: int = 1
    display: Display | None = None
    on_call: Callable[[JournalEntry], None] | None = None
    _made: int = 0  # calls made by this grader

    def _note(self, text: str) -> None:
        if self.display is not None:
            self.display.note(text)

    async def grade(self, items: Sequence[GradeItem], *, retry_errors: int = 0) -> None:
        """Journal a verdict or an error for every gradable item."""
        gradable = [i for i in items if i.key is not None and i.case is not None]
        pending: list[GradeItem] = []
        from_cache = kept_errors = 0
        for item in gradable:
            key = item.key or ""
            entry = self.journal.latest(key)
            if entry is None and (cached := self.cache.get(key)) is not None:
                self.journal.append(
                    cached.model_copy(update={"cached_from": "cache", "at": _now()})
                )
                from_cache += 1
            elif entry is None:
                pending.append(item)
            elif entry.outcome == "error":
                kept_errors += 1
            if entry is not None and entry.outcome == "verdicts" and entry.cached_from is None:
                self.pacer.record(_timings(entry), timed_out=False)
        done = len(gradable) - len(pending) - from_cache
        self._note(
            f"judge calls: {len(pending)} to make, {done} already journaled "
            f"({kept_errors} of them errors), {from_cache} from the cache; "
            f"{self.parallel} at a time"
        )
        self._estimate(len(pending) + (kept_errors if retry_errors else 0), "before the run")
        if self.display is not None:
            self.display.start(len(pending), [o for i in gradable for o in self._current(i)])
        await self._call_all(pending)
        for round_number in range(1, retry_errors + 1):
            errors = [i for i in gradable if self._last_outcome(i) == "error"]
            if not errors:
                break
            self._note(f"retry round {round_number}: {len(errors)} error(s) asked again")
            if self.display is not None:
                self.display.extend(len(errors), [o for i in errors for o in self._current(i)])
            await self._call_all(errors)
        if self.display is not None:
            self.display.stop()

    def _current(self, item: GradeItem) -> list[CriterionOutcome]:
        """What the tally counts of ``item`` now (calibration answers are not in the tally)."""
        entry = self.journal.latest(item.key) if item.key else None
        if entry is None or item.kind != "scenario":
            return []
        return outcomes_for(item, entry)

    def _last_outcome(self, item: GradeItem) -> str | None:
        entry = self.journal.latest(item.key) if item.key else None
        return None if entry is None else entry.outcome

    def _estimate(self, calls: int, when: str) -> None:
        seconds = self.pacer.estimate_s(calls, self.parallel)
        if calls and seconds is not None:
            per_call = self.pacer.seconds_per_call() or 0.0
            self._note(
                f"estimate ({when}): {calls} call(s) × {per_call:.1f} s ÷ {self.parallel} "
                f"slot(s) ≈ {format_duration(seconds)}"
            )
        elif calls:
            self._note(f"estimate: after the first {self.pacer.warm_up_calls} calls")

    async def _call_all(self, items: Sequence[GradeItem]) -> None:
        queue: asyncio.Queue[GradeItem] = asyncio.Queue()
        for item in items:
            queue.put_nowait(item)
        remaining = [len(items)]

        async def worker() -> None:
            while not queue.empty():
                item = queue.get_nowait()
                if item.key is None or item.case is None:
                    continue
                await self._call_one(item, item.key, item.case)
                remaining[0] -= 1
                self._made += 1
                if self._made == self.pacer.warm_up_calls:
                    self._estimate(remaining[0], f"measured on the first {self._made} calls")

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.parallel, max(1, len(items)))):
                    group.create_task(worker())
        except BaseExceptionGroup as failures:
            raise failures.exceptions[0] from None

    async def _call_one(self, item: GradeItem, key: str, case: Case) -> None:
        previous = self.journal.latest(key)
        generous = previous is not None and previous.error_kind == "timeout"
        budgets = self.pacer.budgets(generous=generous)
        criteria = list(item.scenario.criteria)
        call = await call_judge(
            self.provider, item.messages, criteria, self.config.options(criteria), budgets
        )
        entry = JournalEntry(
            key=key,
            item=item.name,
            kind=item.kind,
            scenario_id=item.scenario.id,
            repeat=item.repeat,
            at=_now(),
            judge_type=self.config.provider_type,
            judge_url=self.config.base_url,
            judge_model=self.config.model,
            judge_digest=self.identity.digest,
            rubric_hash=self.rubric_hash,
            answer_hash=case.digest(),
            options=self.config.options_key(),
            outcome="verdicts" if call.verdicts is not None else "error",
            verdicts=call.verdicts,
            error_kind=call.error_kind,
            cause=call.cause,
            raw=call.raw,
            done_reason=call.done_reason,
            timings={
                "first_token_s": call.timings.first_token_s,
                "max_gap_s": call.timings.max_gap_s,
                "total_s": call.timings.total_s,
                "chunks": call.timings.chunks,
            },
            budgets={
                "first_token_s": budgets.first_token_s,
                "idle_s": budgets.idle_s,
                "total_s": budgets.total_s,
            },
            attempt=self.journal.attempts(key) + 1,
        )
        self.journal.append(entry)
        self.cache.put(entry)
        self.pacer.record(call.timings, timed_out=call.error_kind == "timeout")
        if self.display is not None:
            counted = item.kind == "scenario"
            replaced = outcomes_for(item, previous) if previous is not None and counted else []
            self.display.advance(outcomes_for(item, entry) if counted else [], replaces=replaced)
        if self.on_call is not None:
            self.on_call(entry)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _timings(entry: JournalEntry) -> CallTimings:
    def number(name: str) -> float | None:
        value = entry.timings.get(name)
        return float(value) if isinstance(value, int | float) else None

    return CallTimings(
        first_token_s=number("first_token_s"),
        max_gap_s=number("max_gap_s"),
        total_s=number("total_s") or 0.0,
        chunks=int(entry.timings.get("chunks") or 0),
    )
