"""Reports and comparisons: counts add up, kappa against people, McNemar between two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.calibration import CALIBRATION_DIR, load_calibration
from bench.compare import compare_results
from bench.evaluation import JudgeRun, judge_run
from bench.judge import JudgeConfig
from bench.scenario import load_scenarios
from llm.config import Budgets
from server.cli import app
from tests.bench.helpers import JUDGE_MODEL, make_run, verdicts_json
from tests.fakes import Behaviour, FakeOllama

FAST = Budgets(connect_s=1, first_token_s=2, idle_s=1, total_s=4, retries=0)


def results(outcomes: dict[tuple[str, int], dict[str, str]]) -> dict[str, Any]:
    items = [
        {"scenario_id": s, "repeat": r, "checks": [],
         "criteria": [{"criterion": c, "outcome": o} for c, o in criteria.items()]}
        for (s, r), criteria in outcomes.items()
    ]  # fmt: skip
    return {"run": {"run_id": "x"}, "judge": {"model": "j"}, "items": items}


def test_compare_pairs_items_and_leaves_errors_unpaired() -> None:
    a = results({(f"s{i}", 0): {"ton": "PASS"} for i in range(8)} | {("s8", 0): {"ton": "ERROR"}})
    b_outcomes = {(f"s{i}", 0): {"ton": "FAIL" if i < 6 else "PASS"} for i in range(8)}
    b = results(b_outcomes | {("s8", 0): {"ton": "PASS"}})
    [row] = compare_results(a, b)
    assert (row.name, row.pairs, row.a_passed, row.b_passed, row.unpaired) == ("ton", 8, 8, 2, 1)
    assert (row.test.b, row.test.c) == (6, 0)
    assert row.test.p_exact == pytest.approx(2 / 64)


@pytest.mark.anyio
async def test_kappa_against_the_example_calibration_set(tmp_path: Path) -> None:
    scenarios = load_scenarios()
    entries = load_calibration(CALIBRATION_DIR, scenarios)
    by_id = {s.id: s for s in scenarios}
    one = [by_id["tapage-nocturne-police"]]
    run = make_run(tmp_path / "run", one)
    with FakeOllama(models=[JUDGE_MODEL], loaded=True) as fake:
        fake.enqueue(Behaviour.normal(verdicts_json(one[0].criteria)))
        for index, entry in enumerate(entries):
            criteria = by_id[entry.scenario].criteria
            if index == 0:
                fake.enqueue(Behaviour.normal("illisible"))  # the judge fails on one entry
                continue
            answer = {c: {"raison": "r", "verdict": entry.labels.get(c, "PASS")} for c in criteria}
            fake.enqueue(Behaviour.normal(json.dumps(answer)))
        job = JudgeRun(JudgeConfig(model=JUDGE_MODEL, base_url=fake.url), calibration=CALIBRATION_DIR,
                       initial_budgets=FAST)  # fmt: skip
        summary = await judge_run(run.path, job)
    pooled = summary.kappa["(toutes)"]
    assert pooled.kappa == pytest.approx(1.0)  # the judge agrees with every label it graded
    assert pooled.unpaired == len(entries[0].labels)  # the failed entry is not agreement
    assert pooled.pairs == sum(len(e.labels) for e in entries[1:])
    assert summary.counts == {"PASS": len(one[0].criteria)}  # calibration stays out of the counts
    html = (run.path / "judge" / "report.html").read_text(encoding="utf-8")
    assert "Agreement with people (calibration)" in html


def test_compare_command_on_two_judged_runs(tmp_path: Path) -> None:
    scenarios = load_scenarios(only=["tapage-nocturne-police", "perceuse-dimanche"])
    runner = CliRunner()
    for name, verdict in (("a", "PASS"), ("b", "FAIL")):
        run = make_run(tmp_path / name, scenarios, repeat=2)
        with FakeOllama(models=[JUDGE_MODEL], loaded=True) as fake:
            for _ in range(2):
                for scenario in scenarios:
                    fake.enqueue(Behaviour.normal(verdicts_json(scenario.criteria, verdict)))
            args = [
                "bench",
                "judge",
                str(run.path),
                "--judge-url",
                fake.url,
                "--judge-model",
                JUDGE_MODEL,
            ]
            assert runner.invoke(app, args).exit_code == 0
    out = tmp_path / "compare.md"
    result = runner.invoke(
        app, ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    table = out.read_text(encoding="utf-8")
    assert "| faits_exacts | 4 | 100 % | 0 % | 4 | 0 | 0.125 | 0.062 | 0 |" in table
    assert "| check:categorie | 4 | 100 % | 100 % | 0 | 0 | 1.000 | 1.000 | 0 |" in table
