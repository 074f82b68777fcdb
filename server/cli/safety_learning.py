"""``nuisances safety train`` and ``nuisances safety eval --cv``: the learned layer's commands.

Both need the dev dependencies (scikit-learn, numpy): they build the model, ``detect`` only
reads it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from safety.evaluation import RISK_CATEGORIES, Outcome, Report

console = Console(highlight=False, soft_wrap=True)

CORPUS_DIR = Path("tests/corpus/safety")
TEAM_DIR = Path("safety/training/team")
WEIGHTS = Path("safety/weights/model.json")


def _training() -> Any:
    try:
        from safety import training
    except ImportError as exc:  # scikit-learn is a dev dependency
        raise typer.BadParameter(
            f"training needs the dev dependencies ({exc.name} is missing): pip install -e '.[dev]'"
        ) from exc
    return training


def _workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def _line(outcome: Outcome) -> str:
    rules = ",".join(outcome.rules) or "-"
    return (
        f"    {outcome.id}: expected {outcome.expected}, got {outcome.got}"
        f" (risk {outcome.risk:.2f}) [{rules}] {outcome.text!r}"
    )


def _writer_table(reports: dict[str, Report]) -> Table:
    table = Table(title="leave one writer out: each writer scored by a model trained without it")
    for column in (
        "writer", "risk lines", "recall", *RISK_CATEGORIES, "category", "alarms", "edge",
    ):  # fmt: skip
        table.add_column(column, justify="right" if column != "writer" else "left")
    for writer, report in reports.items():
        risk = [o for o in report.rows("clear") if o.card_expected]
        table.add_row(
            writer,
            str(len(risk)),
            f"{report.card_recall_all:.1%}",
            *(f"{report.card_recall[c]:.1%}" for c in RISK_CATEGORIES),
            f"{report.category_accuracy:.1%}",
            f"{report.false_alarm_rate:.1%} ({len(report.false_alarms)})",
            f"{report.edge_agreement:.0%}",
        )
    return table


def print_cross_validation(validation: Any, seconds: float, verbose: bool) -> None:
    """The per-writer table, every miss and false alarm, then six summary lines."""
    reports: dict[str, Report] = validation.reports
    if verbose:
        for writer, report in reports.items():
            console.print(f"held-out writer {writer}:", style="bold")
            for title, outcomes in (
                ("missed", report.misses),
                ("wrong category", report.wrong_categories),
                ("false alarms", report.false_alarms),
            ):
                console.print(f"  {title}: {len(outcomes)}")
                for outcome in outcomes:
                    console.print(_line(outcome), markup=False)
    console.print(_writer_table(reports))
    pooled: Report = validation.pooled
    risk = [o for o in pooled.rows("clear") if o.card_expected]
    calm = [o for o in pooled.rows("clear") if not o.card_expected]
    weakest = min(reports, key=lambda w: reports[w].card_recall_all)
    alone = validation.learned_alone
    threshold, rule_threshold = validation.thresholds
    lines = [
        f"cross-validated over {len(reports)} writers in {seconds:.0f} s; thresholds:"
        f" model {threshold:.2f}, rules {rule_threshold:.2f}",
        "recall per category: "
        + ", ".join(f"{c} {pooled.card_recall[c]:.1%}" for c in RISK_CATEGORIES),
        f"recall of clear risks: {pooled.card_recall_all:.1%} ({len(pooled.misses)} missed of"
        f" {len(risk)}); weakest writer: {weakest} {reports[weakest].card_recall_all:.1%}",
        f"category accuracy: {pooled.category_accuracy:.1%}; edge agreement:"
        f" {pooled.edge_agreement:.1%} of {len(pooled.rows('edge'))}",
        f"false alarms on clear 'rien': {pooled.false_alarm_rate:.1%}"
        f" ({len(pooled.false_alarms)} of {len(calm)})",
        f"learned layer alone (rules as features only, threshold {alone.thresholds[0]:.2f}):"
        f" recall {alone.recall:.1%}, false alarms {alone.false_alarms:.1%}",
    ]
    for line in lines:
        console.print(line, markup=False)


def cross_validation_json(validation: Any) -> dict[str, Any]:
    pooled: Report = validation.pooled
    return {
        "thresholds": list(validation.thresholds),
        "recall": pooled.card_recall_all,
        "card_recall": pooled.card_recall,
        "category_accuracy": pooled.category_accuracy,
        "false_alarm_rate": pooled.false_alarm_rate,
        "edge_agreement": pooled.edge_agreement,
        "learned_alone": {
            "threshold": validation.learned_alone.thresholds[0],
            "recall": validation.learned_alone.recall,
            "false_alarm_rate": validation.learned_alone.false_alarms,
        },
        "writers": {
            w: {
                "recall": r.card_recall_all,
                "category_accuracy": r.category_accuracy,
                "false_alarm_rate": r.false_alarm_rate,
                "misses": [o.id for o in r.misses],
                "false_alarms": [o.id for o in r.false_alarms],
            }
            for w, r in validation.reports.items()
        },
    }


def cross_validation(corpus: Path, team: Path | None, as_json: bool, verbose: bool) -> None:
    training = _training()
    try:
        examples, team_lines = training.read_corpora(corpus, team)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    started = time.perf_counter()
    validation = training.cross_validate(
        examples, team_lines, training.Params(), workers=_workers()
    )
    if as_json:
        typer.echo(json.dumps(cross_validation_json(validation), indent=2))
        return
    print_cross_validation(validation, time.perf_counter() - started, verbose)


def train(
    corpus: Annotated[
        Path, typer.Option(exists=True, file_okay=False, help="One JSONL file per writer.")
    ] = CORPUS_DIR,
    team: Annotated[
        Path, typer.Option(exists=True, file_okay=False, help="The team's own training lines.")
    ] = TEAM_DIR,
    out: Annotated[Path, typer.Option(help="Where to write the weights.")] = WEIGHTS,
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; fail when a fresh training differs from OUT."),
    ] = False,
) -> None:
    """Train the learned layer (thresholds chosen on leave-one-writer-out), write its weights."""
    training = _training()
    started = time.perf_counter()
    try:
        content, validation = training.train(corpus, team, training.Params(), workers=_workers())
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    text = training.dumps(content)
    print_cross_validation(validation, time.perf_counter() - started, verbose=False)
    if check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            console.print(f"{out} differs from a fresh training: run `nuisances safety train`.")
            raise typer.Exit(1)
        console.print(f"{out} is what training gives, byte for byte.")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"wrote {out}: {len(content['weights'])} features, {len(text):,} bytes")
