"""``nuisances bench run|judge|compare|scenarios``: the LLM-judge bench (see ``bench/``).

Exit codes: 0 done (and the coverage gate passed); 1 the coverage gate failed; 2 refused
(invalid input, a judge that may be the model under test, a run directory of another run).

``bench`` is imported inside each command: a build without it (the service's wheel) keeps
every other command, and says so here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console

from server.settings import SettingsError, load_settings

if TYPE_CHECKING:
    from bench.records import RunDir, RunManifest
    from bench.scenario import Scenario

__all__ = ["bench_app"]

console = Console(highlight=False, soft_wrap=True)
bench_app = typer.Typer(
    help="The LLM-judge bench: play scenarios, then grade the answers.", no_args_is_help=True
)


def _require_bench() -> None:
    if importlib.util.find_spec("bench") is None:
        console.print(
            "the bench is not part of this build: run it from the source tree", style="red"
        )
        raise typer.Exit(2)


def _scenarios(directory: Path | None, only: list[str] | None) -> list[Scenario]:
    _require_bench()
    from bench.scenario import SCENARIOS_DIR, ScenarioError, load_scenarios

    try:
        return load_scenarios(directory or SCENARIOS_DIR, only or ())
    except ScenarioError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc


@bench_app.command("scenarios")
def scenarios_command(
    scenarios: Annotated[Path | None, typer.Option(help="Default: bench/scenarios.")] = None,
) -> None:
    """Validate the scenarios and count them per expected category."""
    found = _scenarios(scenarios, None)
    counts = Counter(s.expected_category for s in found)
    console.print(f"{len(found)} scenarios: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for scenario in found:
        kind = f"{len(scenario.turns)} turns" if scenario.conversation else "message"
        console.print(
            f"  {scenario.id} [{scenario.expected_category}, {kind}] {scenario.title}", markup=False
        )


async def _run(
    found: list[Scenario], run_dir: RunDir, url: str | None, token: str | None, repeat: int
) -> RunManifest:
    from bench.runner import in_process_target, run_bench, url_target

    if url is not None:
        if not token:
            console.print("--url needs --token (or NUISANCES_TOKEN)", style="red")
            raise typer.Exit(2)
        async with url_target(url, token) as target:
            return await run_bench(target, found, run_dir, repeat=repeat, console=console)
    try:
        settings = load_settings()
    except SettingsError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    async with in_process_target(settings) as target:
        return await run_bench(target, found, run_dir, repeat=repeat, console=console)


@bench_app.command("run")
def run_command(
    scenarios: Annotated[Path | None, typer.Option(help="Default: bench/scenarios.")] = None,
    only: Annotated[list[str] | None, typer.Option(help="Play only this scenario id.")] = None,
    url: Annotated[str | None, typer.Option(help="A running server (default: in-process).")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token for --url.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (resumed if it exists).")] = None,
    repeat: Annotated[int, typer.Option(min=1, max=50, help="Plays per scenario.")] = 1,
) -> None:
    """Play every scenario through the assistant and record the answers."""
    found = _scenarios(scenarios, only)
    from bench.pacing import format_duration
    from bench.records import RunDir
    from bench.runner import RunMismatch

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_dir = RunDir(out or Path("bench-runs") / stamp)
    bearer = token or os.environ.get("NUISANCES_TOKEN")
    try:
        manifest = asyncio.run(_run(found, run_dir, url, bearer, repeat))
    except RunMismatch as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    target = manifest.target
    console.print(
        f"run {manifest.run_id}: {manifest.answers} answer(s) from {target.provider_type} · "
        f"{target.model} in {format_duration(manifest.wall_s or 0)} → {run_dir.path}",
        markup=False,
    )


@bench_app.command("judge")
def judge_command(
    run_dir: Annotated[Path, typer.Argument(help="A directory written by `bench run`.")],
    judge_url: Annotated[
        str, typer.Option(envvar="NUISANCES_JUDGE_URL", help="The judge's model server.")
    ] = "http://127.0.0.1:11434",
    judge_type: Annotated[
        str, typer.Option(envvar="NUISANCES_JUDGE_TYPE", help="ollama or openai_compat.")
    ] = "ollama",
    judge_model: Annotated[
        str | None, typer.Option(envvar="NUISANCES_JUDGE_MODEL", help="The judge model.")
    ] = None,
    judge_parallel: Annotated[int, typer.Option(min=1, max=64, help="Server slots.")] = 1,
    judge_seed: Annotated[int, typer.Option(help="Seed of every judge call.")] = 7,
    judge_num_predict: Annotated[int, typer.Option(min=16, max=8192)] = 768,
    judge_num_ctx: Annotated[int, typer.Option(min=512)] = 4096,
    allow_self_judge: Annotated[bool, typer.Option(help="Let the model grade itself.")] = False,
    coverage_gate: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.9,
    retry_errors: Annotated[int, typer.Option(min=0, max=10, help="Rounds of retries.")] = 0,
    calibration: Annotated[Path | None, typer.Option(help="Human-labelled answers.")] = None,
    cache: Annotated[Path | None, typer.Option(help="Verdict cache shared by runs.")] = None,
    out: Annotated[Path | None, typer.Option(help="Default: RUN_DIR/judge.")] = None,
    first_token_s: Annotated[float | None, typer.Option(help="Initial budget (600).")] = None,
    idle_s: Annotated[float | None, typer.Option(help="Initial budget (180).")] = None,
    total_s: Annotated[float | None, typer.Option(help="Initial budget (1200).")] = None,
    warm_up_calls: Annotated[int, typer.Option(min=1, help="Calls before budgets adapt.")] = 3,
    max_turn_s: Annotated[float, typer.Option(help="Check: slowest acceptable turn.")] = 150.0,
) -> None:
    """Grade a run: deterministic checks, then the judge; reports in RUN_DIR/judge."""
    _require_bench()
    from bench.evaluation import GENEROUS, JudgeRun, SelfJudgeRefused, judge_run
    from bench.judge import JudgeConfig
    from bench.pacing import format_duration
    from bench.records import RunDir
    from bench.report import pct
    from bench.scenario import ScenarioError
    from llm.config import Budgets

    if judge_model is None:
        console.print("--judge-model is required (or NUISANCES_JUDGE_MODEL)", style="red")
        raise typer.Exit(2)
    if judge_type not in ("ollama", "openai_compat"):
        console.print("--judge-type must be ollama or openai_compat", style="red")
        raise typer.Exit(2)
    kind: Literal["ollama", "openai_compat"] = (
        "ollama" if judge_type == "ollama" else "openai_compat"
    )
    if not RunDir(run_dir).exists():
        console.print(f"{run_dir}: no run.json (run `nuisances bench run` first)", style="red")
        raise typer.Exit(2)
    try:
        chosen = {"first_token_s": first_token_s, "idle_s": idle_s, "total_s": total_s}
        budgets = Budgets.model_validate(
            {**GENEROUS.model_dump(), **{k: v for k, v in chosen.items() if v is not None}}
        )
        job = JudgeRun(
            config=JudgeConfig(
                provider_type=kind,
                base_url=judge_url,
                model=judge_model,
                parallel=judge_parallel,
                seed=judge_seed,
                num_predict=judge_num_predict,
                num_ctx=judge_num_ctx,
            ),
            allow_self_judge=allow_self_judge,
            coverage_gate=coverage_gate,
            retry_errors=retry_errors,
            calibration=calibration,
            cache_path=cache,
            out_dir=out,
            initial_budgets=budgets,
            warm_up_calls=warm_up_calls,
            max_turn_s=max_turn_s,
        )
        summary = asyncio.run(judge_run(run_dir, job, console=console))
    except SelfJudgeRefused as exc:
        console.print(f"{exc}; pass --allow-self-judge to grade anyway", style="red", markup=False)
        raise typer.Exit(2) from exc
    except (ScenarioError, ValueError) as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    counts = summary.counts
    gate = "passed" if summary.passed_gate else "FAILED"
    console.print(
        f"PASS {counts['PASS']} · FAIL {counts['FAIL']} · ERROR {counts['ERROR']} "
        f"({', '.join(f'{k} {v}' for k, v in summary.error_kinds.items()) or 'no error'}); "
        f"coverage {pct(summary.coverage)}, gate {pct(summary.gate)} {gate}; "
        f"{format_duration(summary.wall_s)} → {(out or run_dir / 'judge') / 'report.html'}",
        markup=False,
    )
    if not summary.passed_gate:
        raise typer.Exit(1)


@bench_app.command("compare")
def compare_command(
    run_a: Annotated[Path, typer.Argument(help="The reference run.")],
    run_b: Annotated[Path, typer.Argument(help="The run compared with it.")],
    judge_dir: Annotated[str, typer.Option(help="Judge folder inside each run.")] = "judge",
    out: Annotated[Path | None, typer.Option(help="Also write the table here.")] = None,
) -> None:
    """McNemar's paired test per criterion between two judged runs."""
    _require_bench()
    from bench.compare import compare_results, comparison_markdown, load_results

    try:
        a, b = load_results(run_a, judge_dir), load_results(run_b, judge_dir)
    except (OSError, ValueError) as exc:
        console.print(f"cannot read results: {exc}", style="red", markup=False)
        raise typer.Exit(2) from exc
    text = comparison_markdown(a, b, compare_results(a, b))
    console.print(text, markup=False)
    if out is not None:
        out.write_text(text, encoding="utf-8")
