"""``bench judge``: grade a recorded run, write ``results.json``, ``report.md``, ``report.html``.

The judge is refused when it may be the model under test (``bench.identity``), unless allowed
explicitly, and the report then says so. Its concurrency is capped by the server's slots when
the server tells them. Deterministic checks run on every answer; the judge grades each answer
once per repeat (``bench.grader``), and a calibration set, when given, is graded the same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rich.console import Console

from bench.calibration import calibration_case, load_calibration
from bench.checks import CheckResult, run_checks
from bench.grader import GradeItem, Grader, outcomes_for
from bench.html import write_html
from bench.identity import ModelIdentity, ollama_digest, self_judge_reasons
from bench.journal import Journal, JournalEntry, VerdictCache, cache_key
from bench.judge import JudgeConfig, server_slots
from bench.pacing import Pacer
from bench.progress import Display
from bench.records import AnswerRecord, RunDir
from bench.report import write_markdown
from bench.rubric import Case, build_messages, rubric_hash
from bench.scenario import Scenario, load_scenarios
from bench.summary import ItemResult, Summary, summarise
from llm.config import Budgets
from llm.providers import build_provider

__all__ = ["JudgeRun", "SelfJudgeRefused", "judge_run", "record_case"]

GENEROUS = Budgets(
    connect_s=10.0,
    first_token_s=600.0,
    idle_s=180.0,
    total_s=1200.0,
    num_predict=8192,
    loop_repeats=64,
    retries=2,
    retry_backoff_s=0.5,
)


class SelfJudgeRefused(RuntimeError):
    """The judge may be the model under test, and that was not allowed."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("the judge may be the model under test: " + "; ".join(reasons))
        self.reasons = reasons


@dataclass
class JudgeRun:
    """What ``bench judge`` was asked to do."""

    config: JudgeConfig
    allow_self_judge: bool = False
    coverage_gate: float = 0.9
    retry_errors: int = 0
    calibration: Path | None = None
    cache_path: Path | None = None
    out_dir: Path | None = None  # default: RUN_DIR/judge
    initial_budgets: Budgets = field(default_factory=lambda: GENEROUS)
    floors: tuple[float, float, float] = (20.0, 10.0, 60.0)  # first token, idle, total
    warm_up_calls: int = 3
    max_turn_s: float = 150.0


def record_case(scenario: Scenario, record: AnswerRecord) -> Case | None:
    """What the judge reads of a recorded answer; None when the last turn has no answer."""
    response = record.final.response
    if response is None:
        return None
    earlier = tuple(
        (turn.message, turn.response.text) for turn in record.turns[:-1] if turn.response
    )
    return Case(
        scenario=scenario,
        earlier=earlier,
        last_message=record.final.message,
        answer=response.text,
        detected_category=response.safety.category,
        card=tuple(contact.name for contact in response.safety.card),
    )


def _item(
    kind: Literal["scenario", "calibration"],
    name: str,
    scenario: Scenario,
    repeat: int,
    case: Case | None,
    context: tuple[ModelIdentity, JudgeConfig, dict[str, str]],
    no_answer: str | None = None,
) -> GradeItem:
    judge, config, names = context
    if case is None:
        return GradeItem(kind, name, scenario, repeat, None, None, (), no_answer)
    key = cache_key(
        judge=judge,
        rubric_hash=rubric_hash(),
        answer_hash=case.digest(),
        options=config.options_key(),
        repeat=repeat,
    )
    messages = tuple(build_messages(case, names))
    return GradeItem(kind, name, scenario, repeat, case, key, messages)


def _result(
    item: GradeItem,
    entry: JournalEntry | None,
    record: AnswerRecord | None,
    checks: list[CheckResult],
    labels: dict[str, str],
) -> ItemResult:
    response = record.final.response if record is not None else None
    timings = response.timings if response is not None else None
    return ItemResult(
        name=item.name,
        kind=item.kind,
        scenario_id=item.scenario.id,
        title=item.scenario.title,
        expected_category=item.scenario.expected_category,
        repeat=item.repeat,
        source=response.source if response else ("calibration" if labels else None),
        status=response.status if response else None,
        detected_category=item.case.detected_category if item.case else None,
        answer=item.case.answer if item.case else None,
        checks=checks,
        criteria=outcomes_for(item, entry),
        raw=entry.raw if entry is not None else None,
        judge_total_s=_number(entry.timings.get("total_s"))
        if entry and not entry.cached_from
        else None,
        assistant_total_ms=timings.total_ms if timings else None,
        assistant_first_token_ms=timings.first_token_ms if timings else None,
        labels=labels,
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


async def judge_run(
    run_path: Path,
    job: JudgeRun,
    *,
    console: Console | None = None,
    on_call: Callable[[JournalEntry], None] | None = None,
) -> Summary:
    """Grade the run in ``run_path``; raises ``SelfJudgeRefused`` before any call."""
    started = time.perf_counter()
    run_dir = RunDir(run_path)
    manifest, scenarios = run_dir.manifest(), run_dir.scenarios()
    answers = {record.key: record for record in run_dir.answers()}
    config, target = job.config, manifest.target
    digest = (
        await ollama_digest(config.base_url, config.model)
        if config.provider_type == "ollama"
        else None
    )
    judge = ModelIdentity(config.provider_type, config.base_url, config.model, digest)
    reasons = self_judge_reasons(
        ModelIdentity(target.provider_type, target.base_url, target.model, target.digest), judge
    )
    if reasons and not job.allow_self_judge:
        raise SelfJudgeRefused(reasons)
    display = Display(console) if console is not None else None
    parallel = config.parallel
    slots = await server_slots(config)
    if slots is not None and parallel > slots:
        parallel = slots
        if display is not None:
            display.note(f"--judge-parallel lowered to the server's {slots} slot(s)")
    names = {entry.id: entry.name for entry in manifest.directory}
    context = (judge, config, names)
    items: list[GradeItem] = []
    for repeat in range(manifest.repeat):
        for scenario in scenarios:
            record = answers.get((scenario.id, repeat))
            case = record_case(scenario, record) if record is not None else None
            why = "not recorded" if record is None else (record.final.error or "no answer")
            name = f"{scenario.id}#r{repeat}"
            items.append(_item("scenario", name, scenario, repeat, case, context, why))
    # Calibration entries may label scenarios this run did not play: the shipped set too.
    by_id = {s.id: s for s in (*load_scenarios(), *scenarios)} if job.calibration else {}
    entries = load_calibration(job.calibration, list(by_id.values())) if job.calibration else []
    for entry in entries:
        scenario = by_id[entry.scenario]
        case = calibration_case(entry, scenario)
        name = f"calibration:{entry.id}"
        items.append(_item("calibration", name, scenario, 0, case, context))
    out_dir = job.out_dir or run_path / "judge"
    out_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(out_dir / "journal.jsonl")
    first, idle, total = job.floors
    pacer = Pacer(job.initial_budgets, first, idle, total, warm_up_calls=job.warm_up_calls)
    provider = build_provider(config.provider_config(), job.initial_budgets)
    grader = Grader(
        provider=provider,
        config=config,
        identity=judge,
        rubric_hash=rubric_hash(),
        journal=journal,
        cache=VerdictCache(job.cache_path),
        pacer=pacer,
        parallel=parallel,
        display=display,
        on_call=on_call,
    )
    try:
        await grader.grade(items, retry_errors=job.retry_errors)
    finally:
        await provider.aclose()
    labels = {f"calibration:{e.id}": {str(k): str(v) for k, v in e.labels.items()} for e in entries}
    results, calibrated = [], []
    for item in items:
        entry_ = journal.latest(item.key) if item.key else None
        if item.kind == "calibration":
            calibrated.append(_result(item, entry_, None, [], labels[item.name]))
            continue
        record = answers.get((item.scenario.id, item.repeat))
        checks = (
            run_checks(item.scenario, record, manifest.directory, max_turn_s=job.max_turn_s)
            if record
            else []
        )
        results.append(_result(item, entry_, record, checks, {}))
    summary = summarise(
        run=manifest.model_dump(mode="json", exclude={"directory"}),
        judge={
            "provider_type": config.provider_type,
            "base_url": config.base_url,
            "model": config.model,
            "digest": digest,
            "rubric_hash": rubric_hash(),
            "options": config.options_key(),
            "parallel": parallel,
            "self_judge": bool(reasons),
            "self_judge_reasons": reasons,
            "budgets": pacer.budgets().model_dump(include={"first_token_s", "idle_s", "total_s"}),
            "journal": str(journal.path),
            "journal_skipped_lines": journal.skipped,
        },
        gate=job.coverage_gate,
        items=results,
        calibration=calibrated,
        wall_s=time.perf_counter() - started,
    )
    (out_dir / "results.json").write_text(
        json.dumps(summary.as_json(), ensure_ascii=False, indent=1), encoding="utf-8"
    )
    write_markdown(summary, out_dir / "report.md")
    write_html(summary, out_dir / "report.html")
    return summary
