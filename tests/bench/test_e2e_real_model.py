"""End to end with a real small model: SmolLM2-135M answers, a second llama.cpp server judges.

The assistant is the session's ``llama_server`` (``tests/real_model.py``), driven in-process by
``nuisances bench run`` with the settings taken from the environment; the judge is a second
llama-cpp-python server started here on another port from the same GGUF. Same weights: the
judge is refused as the model under test, then allowed explicitly. A 135M model grades at
random or writes unusable output: this asserts the structure (the run completes, the reports
exist, the outcome counts add up, coverage matches), never the quality. Figures are printed
(``-s``), never asserted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from server.cli import app
from tests.real_model import MODEL_ALIAS, llama_server, start_llama_server

__all__ = ["llama_server"]  # the session fixture, registered for this module by the import

RUNNER = CliRunner()
SCENARIOS = ["tapage-nocturne-police", "gaz-cage-escalier", "veux-mourir-mairie"]


@pytest.fixture(scope="module")
def judge_server() -> Iterator[str]:
    """A second llama-cpp-python server on its own port, from the same GGUF."""
    with start_llama_server(alias=MODEL_ALIAS) as url:
        yield url


def test_a_complete_run_with_the_real_small_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llama_server: str, judge_server: str
) -> None:
    monkeypatch.delenv("NUISANCES_CONFIG", raising=False)
    for name, value in {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.db'}",
        "PROVIDER__TYPE": "openai_compat", "PROVIDER__BASE_URL": llama_server,
        "PROVIDER__MODEL": MODEL_ALIAS, "BUDGETS__NUM_PREDICT": "48", "WARM_UP": "false",
        "HEALTH_INTERVAL_S": "3600",
    }.items():  # fmt: skip
        monkeypatch.setenv(f"NUISANCES_{name}", value)
    run = tmp_path / "run"
    started = time.perf_counter()
    only = [arg for scenario in SCENARIOS for arg in ("--only", scenario)]
    played = RUNNER.invoke(app, ["bench", "run", *only, "--out", str(run)])
    assert played.exit_code == 0, played.output
    run_s = time.perf_counter() - started
    judge = ["bench", "judge", str(run), "--judge-type", "openai_compat", "--judge-url",
             judge_server, "--judge-model", MODEL_ALIAS, "--judge-num-predict", "320"]  # fmt: skip
    refused = RUNNER.invoke(app, judge)
    assert refused.exit_code == 2  # the same weights behind another port: refused
    assert "same model name" in refused.output
    graded = RUNNER.invoke(app, [*judge, "--allow-self-judge"])
    assert graded.exit_code in (0, 1), graded.output  # 1: the coverage gate failed
    folder = run / "judge"
    assert {"journal.jsonl", "results.json", "report.md", "report.html"} <= {
        p.name for p in folder.iterdir()
    }
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    counts = results["counts"]
    total = sum(counts.values())
    criteria = sum(len(item["criteria"]) for item in results["items"])
    assert (
        total
        == criteria
        == sum(r["passed"] + r["failed"] + r["errors"] for r in results["by_criterion"].values())
    )
    assert set(counts) <= {"PASS", "FAIL", "ERROR"}
    verdicts = counts.get("PASS", 0) + counts.get("FAIL", 0)
    assert results["coverage"] == pytest.approx(verdicts / total)
    assert sum(results["error_kinds"].values()) == counts.get("ERROR", 0)
    assert (graded.exit_code == 0) is (results["coverage"] >= 0.9)
    assert results["judge"]["self_judge"] is True
    assert len(results["items"]) == len(SCENARIOS)
    assert all(len(item["checks"]) == 11 for item in results["items"])
    journal = (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) == len(SCENARIOS)  # one call per answer, each journaled with its raw text
    assert all("raw" in json.loads(line) for line in journal)
    print(
        f"\nreal model bench: PASS {counts.get('PASS', 0)} · FAIL {counts.get('FAIL', 0)} · "
        f"ERROR {counts.get('ERROR', 0)} {results['error_kinds']}; coverage "
        f"{results['coverage']:.0%}; run {run_s:.1f} s, judge {results['wall_s']:.1f} s; "
        f"sources {results['sources']}"
    )
