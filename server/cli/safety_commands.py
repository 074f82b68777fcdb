"""``nuisances safety check|eval|bench|train|mask``: the detector from the command line."""

from __future__ import annotations

import gc
import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from safety import detect
from safety.adversarial import adversarial_inputs
from safety.evaluation import RISK_CATEGORIES, Outcome, Report, compare, read_rows, score
from safety.masking import mask_numbers
from safety.ruleset import RuleSet, RuleSetError, default_ruleset, load_ruleset
from server.cli.safety_learning import CORPUS_DIR, TEAM_DIR, cross_validation, train

app = typer.Typer(help="The emergency detector: check a message, score a corpus, measure speed.")
app.command()(train)
console = Console(highlight=False, soft_wrap=True)

_STYLE = {"danger": "bold red", "detresse": "bold magenta", "represailles": "bold yellow"}


def _read_rows(path: Path) -> list[dict[str, str]]:
    try:
        return read_rows(path)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _corpus_rows(path: Path) -> list[dict[str, str]]:
    """The rows of one JSONL file, or of every ``*.jsonl`` file of a directory."""
    if not path.is_dir():
        return _read_rows(path)
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise typer.BadParameter(f"{path}: no *.jsonl files")
    return [row for f in files for row in _read_rows(f)]


def _load(path: Path | None) -> RuleSet:
    try:
        return default_ruleset() if path is None else load_ruleset(path)
    except RuleSetError as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command()
def check(
    text: Annotated[str, typer.Argument(help="The message, as a person would type it.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the detection as JSON.")] = False,
) -> None:
    """Classify one message: category, rules and spans, the model's probabilities and the
    features that weighed most."""
    detection = detect(text)
    if as_json:
        payload = {
            "category": detection.category,
            "categories": detection.categories,
            "topics": detection.topics,
            "rules": detection.rules,
            "spans": detection.spans,
            "normalized": detection.normalized,
            "probabilities": dict(detection.probabilities),
            "risk": detection.risk,
            "evidence": [
                {"feature": e.feature, "weight": e.weight, "spans": e.spans}
                for e in detection.evidence
            ],
        }
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    style = _STYLE.get(detection.category, "bold green")
    console.print(Text("category: ", style="bold") + Text(detection.category, style=style))
    if detection.categories[1:]:
        console.print(f"also: {', '.join(detection.categories[1:])}")
    if detection.topics:
        console.print(f"topics: {', '.join(detection.topics)}")
    highlighted = Text(text)
    for start, end in detection.spans:
        highlighted.stylize("reverse " + style, start, end)
    console.print(highlighted)
    for match in detection.matches:
        quoted = " | ".join(repr(text[s:e]) for s, e in match.spans) or "(learned layer)"
        console.print(f"  {match.rule} ({match.category}): {quoted}", markup=False)
    probabilities = ", ".join(f"{c} {p:.2f}" for c, p in detection.probabilities)
    console.print(f"learned layer: risk {detection.risk:.2f} ({probabilities})", markup=False)
    for evidence in detection.evidence:
        quoted = " | ".join(repr(text[s:e]) for s, e in evidence.spans)
        console.print(f"  +{evidence.weight:.2f} {evidence.feature}: {quoted}", markup=False)
    console.print(f"normalized: {detection.normalized}", style="dim", markup=False)


@app.command()
def mask(
    text: Annotated[str, typer.Argument(help="Text as a model might write it.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Mask every phone number but the national short ones; show what was masked."""
    masked = mask_numbers(text)
    if as_json:
        typer.echo(json.dumps({"text": masked.text, "spans": masked.spans}, ensure_ascii=False))
        return
    console.print(masked.text, markup=False)
    for start, end in masked.spans:
        console.print(f"  masked {text[start:end]!r} at {start}-{end}", style="dim", markup=False)


def _outcome_line(outcome: Outcome) -> str:
    rules = ",".join(outcome.rules) or "-"
    return (
        f"  {outcome.id}: expected {outcome.expected}, got {outcome.got} [{rules}] {outcome.text!r}"
    )


def _summary(report: Report) -> list[str]:
    clear_risk = [o for o in report.rows("clear") if o.card_expected]
    clear_calm = [o for o in report.rows("clear") if not o.card_expected]
    cards = sum(o.card_shown for o in clear_risk)
    recalls = ", ".join(
        f"{c} {report.card_recall[c]:.1%} (category {report.category_recall[c]:.1%})"
        for c in RISK_CATEGORIES
    )
    return [
        f"card recall per category (clear): {recalls}",
        f"clear risk lines with a card: {cards}/{len(clear_risk)}"
        f" ({cards / max(1, len(clear_risk)):.1%})",
        f"category accuracy on clear risk lines: {report.category_accuracy:.1%};"
        f" edge agreement: {report.edge_agreement:.1%} of {len(report.rows('edge'))}",
        f"false alarms on clear 'rien' lines: {len(report.false_alarms)}/{len(clear_calm)}"
        f" ({report.false_alarm_rate:.1%})",
    ]


def _report_json(report: Report) -> dict[str, Any]:
    return {
        "card_recall": report.card_recall,
        "category_recall": report.category_recall,
        "category_accuracy": report.category_accuracy,
        "false_alarm_rate": report.false_alarm_rate,
        "edge_agreement": report.edge_agreement,
        "misses": [o.id for o in report.misses],
        "wrong_categories": [o.id for o in report.wrong_categories],
        "false_alarms": [o.id for o in report.false_alarms],
        "edge_disagreements": [o.id for o in report.rows("edge") if o.got != o.expected],
    }


@app.command(name="eval")
def evaluate(
    corpus: Annotated[
        Path, typer.Argument(exists=True, help="A JSONL corpus, or a directory of them.")
    ],
    cv: Annotated[
        bool,
        typer.Option(
            "--cv",
            help="Leave one writer out: CORPUS is a directory, one file per writer; each is"
            " scored by a model trained on the others (and the team's lines).",
        ),
    ] = False,
    team: Annotated[
        Path | None,
        typer.Option(file_okay=False, help="With --cv: the team's training lines."),
    ] = TEAM_DIR,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="With --cv: the table and summary only.")
    ] = False,
    rules: Annotated[
        Path | None,
        typer.Option(exists=True, file_okay=False, help="A candidate rule directory to preview."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print figures as JSON.")] = False,
) -> None:
    """Score the detector on a labelled corpus; --cv cross-validates the learned layer by
    writer; --rules previews a candidate rule set (the rules alone, against the current ones:
    retrain to measure the whole detector with it)."""
    if cv:
        if not corpus.is_dir():
            raise typer.BadParameter(f"{corpus}: --cv needs a directory, one file per writer")
        team_dir = team if team is not None and team.is_dir() else None
        cross_validation(corpus, team_dir, as_json, verbose=not quiet)
        return
    rows = _corpus_rows(corpus)
    if rules is not None:
        _preview(rows, _load(rules), as_json)
        return
    report = score(rows)
    if as_json:
        typer.echo(json.dumps(_report_json(report), ensure_ascii=False, indent=2))
        return
    for title, outcomes in (
        ("Missed (risk lines with no card)", report.misses),
        ("Wrong category (card shown, other category)", report.wrong_categories),
        ("False alarms (clear 'rien' lines with a card)", report.false_alarms),
        (
            "Edge lines that disagree with their label (reported, not scored)",
            [o for o in report.rows("edge") if o.got != o.expected],
        ),
    ):
        console.print(f"{title}: {len(outcomes)}", style="bold")
        for outcome in outcomes:
            console.print(_outcome_line(outcome), markup=False)
    for line in _summary(report):
        console.print(line, markup=False)


def _preview(rows: list[dict[str, str]], candidate: RuleSet, as_json: bool) -> None:
    diff = compare(rows, default_ruleset(), candidate)
    groups = {
        "newly caught": diff.newly_caught,
        "newly missed": diff.newly_missed,
        "new false alarms": diff.new_false_alarms,
        "fixed false alarms": diff.fixed_false_alarms,
    }
    if as_json:
        payload: dict[str, Any] = {
            k.replace(" ", "_"): [o.id for o in v] for k, v in groups.items()
        }
        payload["category_changes"] = [[b.id, b.got, a.got] for b, a in diff.category_changes]
        payload["current"] = _report_json(diff.current)
        payload["candidate"] = _report_json(diff.candidate)
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    for title, outcomes in groups.items():
        console.print(f"{title}: {len(outcomes)}", style="bold")
        for outcome in outcomes:
            console.print(_outcome_line(outcome), markup=False)
    console.print(f"category changes: {len(diff.category_changes)}", style="bold")
    for before, after in diff.category_changes:
        console.print(f"  {before.id}: {before.got} -> {after.got}", markup=False)
    table = Table("figure", "current", "candidate")
    for name, old, new in zip(
        ("recall", "accuracy", "alarms"),
        _summary(diff.current)[1:],
        _summary(diff.candidate)[1:],
        strict=True,
    ):
        table.add_row(name, old, new)
    console.print(table)


def _percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(share * len(sorted_values)))]


@app.command()
def bench(
    corpus: Annotated[
        Path, typer.Option(exists=True, help="A JSONL corpus of messages, or a directory of them.")
    ] = CORPUS_DIR,
    repeat: Annotated[int, typer.Option(min=1, help="Passes over the corpus.")] = 20,
) -> None:
    """Print throughput and latency percentiles over a corpus, and the adversarial worst case."""
    texts = [row["text"] for row in _corpus_rows(corpus)]
    ruleset = default_ruleset()
    for text in texts:  # warm caches: the fold table, regex internals
        detect(text)
    gc.collect()  # as a server does once started (see server.main): no full collection
    gc.freeze()  # over the start-up objects is charged to a measured detection
    timings: list[float] = []
    started = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            begin = time.perf_counter()
            detect(text)
            timings.append(time.perf_counter() - begin)
    wall = time.perf_counter() - started
    timings.sort()
    us = 1e6
    console.print(
        f"corpus: {len(texts)} messages x {repeat} passes, {len(timings) / wall:,.0f} messages/s"
    )
    console.print(
        f"latency per message: median {statistics.median(timings) * us:.1f} us,"
        f" p90 {_percentile(timings, 0.90) * us:.1f} us,"
        f" p99 {_percentile(timings, 0.99) * us:.1f} us, max {timings[-1] * us:.1f} us"
    )
    # 10 KB bounds the detector itself; 2,000 characters is the API's message cap, so the
    # worst a client can send.
    worst: dict[int, tuple[float, str]] = {10_240: (0.0, ""), 2_000: (0.0, "")}
    table = Table(title="adversarial inputs, best of 3")
    table.add_column("input", no_wrap=True)
    table.add_column("10 KB ms", justify="right", no_wrap=True)
    table.add_column("2,000 ch. ms", justify="right", no_wrap=True)
    table.add_column("verdict on 10 KB", overflow="ellipsis", no_wrap=True, max_width=22)
    for name, text in adversarial_inputs(ruleset):
        cells = []
        verdict = ""
        for size in worst:
            best = float("inf")
            for _ in range(3):
                begin = time.perf_counter()
                detection = detect(text[:size])
                best = min(best, time.perf_counter() - begin)
                if size == 10_240:
                    verdict = ",".join(detection.rules[:2]) or detection.category
            cells.append(f"{best * 1e3:.2f}")
            worst[size] = max(worst[size], (best, name))
        table.add_row(name, *cells, verdict)
    console.print(table)
    for size, label in ((10_240, "10 KB"), (2_000, "2,000-char")):
        seconds, name = worst[size]
        console.print(
            f"worst case over {label} adversarial inputs: {seconds * 1e3:.2f} ms ({name})"
        )
