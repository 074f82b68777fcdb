"""``nuisances bench judge`` through Typer: self-judging refused, the coverage gate, the reports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest
from typer.testing import CliRunner

from bench.identity import ModelIdentity, normalise_url, self_judge_reasons
from server.cli import app
from tests.bench.helpers import (
    ASSISTANT_MODEL,
    JUDGE_MODEL,
    make_run,
    three_scenarios,
    verdicts_json,
)
from tests.fakes import Behaviour, FakeOllama

RUNNER = CliRunner()
FAST = ["--first-token-s", "2", "--idle-s", "1", "--total-s", "4"]


@pytest.fixture
def judge() -> Iterator[FakeOllama]:
    with FakeOllama(models=[JUDGE_MODEL, ASSISTANT_MODEL], loaded=True,
                    default=Behaviour.normal(verdicts_json())) as fake:  # fmt: skip
        yield fake


def judge_cli(run: Path, url: str, *extra: str, model: str = JUDGE_MODEL) -> tuple[int, str]:
    args = ["bench", "judge", str(run), "--judge-url", url, "--judge-model", model, *FAST, *extra]
    result = RUNNER.invoke(app, args)
    return result.exit_code, result.output


def test_the_model_under_test_may_not_grade_itself(tmp_path: Path, judge: FakeOllama) -> None:
    run = make_run(tmp_path / "run", three_scenarios())
    code, output = judge_cli(run.path, judge.url, model=ASSISTANT_MODEL)
    assert code == 2
    assert "same model name" in output
    assert "--allow-self-judge" in output
    assert judge.requests == []  # refused before any call
    assert not (run.path / "judge").exists()


def test_self_judging_allowed_explicitly_is_marked_in_the_report(
    tmp_path: Path, judge: FakeOllama
) -> None:
    run = make_run(tmp_path / "run", three_scenarios())
    code, _ = judge_cli(run.path, judge.url, "--allow-self-judge", model=ASSISTANT_MODEL)
    assert code == 0
    results = json.loads((run.path / "judge" / "results.json").read_text())
    assert results["judge"]["self_judge"] is True
    assert "Self-judging, allowed explicitly" in (run.path / "judge" / "report.md").read_text()


@pytest.mark.parametrize(
    ("target", "judge", "reasons"),
    [
        (
            ("ollama", "http://localhost:11434", "qwen2.5"),
            ("ollama", "http://127.0.0.1:11434/", "qwen2.5:latest"),
            2,
        ),
        (
            ("openai_compat", "http://127.0.0.1:8080/v1", "smollm2"),
            ("openai_compat", "http://127.0.0.1:8081", "smollm2"),
            1,
        ),  # same weights, two ports
        (
            ("ollama", "http://127.0.0.1:11434", "qwen2.5:1.5b"),
            ("ollama", "http://127.0.0.1:11434", "qwen2.5:7b"),
            0,
        ),
        (
            ("ollama", None, None),
            ("ollama", "http://127.0.0.1:11434", "qwen2.5:7b"),
            0,
        ),  # unknown target
    ],
)
def test_self_judge_rule(
    target: tuple[str, str | None, str | None], judge: tuple[str, str, str], reasons: int
) -> None:
    found = self_judge_reasons(ModelIdentity(*target), ModelIdentity(*judge))
    assert len(found) == reasons, found


def test_same_digest_under_two_names_is_the_same_model() -> None:
    a = ModelIdentity("ollama", "http://a:11434", "mon-modele", "sha256:1")
    b = ModelIdentity("ollama", "http://b:11434", "autre-nom", "sha256:1")
    assert self_judge_reasons(a, b) == ["same model digest (sha256:1)"]


def test_urls_are_compared_by_scheme_host_and_port() -> None:
    assert normalise_url("http://localhost:8080/v1/") == normalise_url("http://127.0.0.1:8080")


@pytest.mark.parametrize(
    ("behaviour", "gate", "code", "coverage"),
    [
        (Behaviour.normal(verdicts_json()), "0.9", 0, 1.0),  # every criterion has a verdict
        (
            Behaviour.normal("pas du JSON"),
            "0.9",
            1,
            0.0,
        ),  # a judge that writes nonsense fails the gate
        (Behaviour.busy(), "0.9", 1, 0.0),  # so does one that is down
        (Behaviour.normal("pas du JSON"), "0", 0, 0.0),  # unless the gate is lowered on purpose
    ],
)
def test_the_coverage_gate(
    tmp_path: Path, behaviour: Behaviour, gate: str, code: int, coverage: float
) -> None:
    with FakeOllama(models=[JUDGE_MODEL], loaded=True, default=behaviour) as fake:
        run = make_run(tmp_path / "run", three_scenarios())
        exit_code, output = judge_cli(run.path, fake.url, "--coverage-gate", gate)
    assert exit_code == code, output
    results = json.loads((run.path / "judge" / "results.json").read_text())
    assert results["coverage"] == coverage
    assert results["passed_gate"] is (code == 0)
    assert sum(results["counts"].values()) == 6  # 3 answers × 2 criteria, none dropped


def test_a_partly_failing_judge_counts_errors_apart(tmp_path: Path, judge: FakeOllama) -> None:
    judge.enqueue(Behaviour.normal(verdicts_json(verdict="FAIL")), Behaviour.server_error())
    run = make_run(tmp_path / "run", three_scenarios())
    code, output = judge_cli(run.path, judge.url, "--coverage-gate", "0.6")
    assert code == 0, output
    assert "PASS 2 · FAIL 2 · ERROR 2 (transport 2)" in output
    results = json.loads((run.path / "judge" / "results.json").read_text())
    assert results["by_criterion"]["etapes_concretes"] == {
        "passed": 1, "failed": 1, "errors": 1, "low": pytest.approx(0.0945, abs=1e-3),
        "high": pytest.approx(0.9055, abs=1e-3), "rate": 0.5, "coverage": pytest.approx(2 / 3),
    }  # fmt: skip


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.tags: set[str] = set()
        self.headings: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self._in_h2 = tag == "h2"
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.external.append(value)
        if tag in ("script", "link", "img", "iframe"):
            self.external.append(tag)

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.headings.append(data)
            self._in_h2 = False


def test_reports_are_written_and_the_html_is_self_contained(
    tmp_path: Path, judge: FakeOllama
) -> None:
    run = make_run(tmp_path / "run", three_scenarios(), repeat=2)
    code, _ = judge_cli(run.path, judge.url, "--calibration", str(tmp_path / "none.yaml"))
    assert code == 2  # a calibration file that does not exist is refused
    code, output = judge_cli(run.path, judge.url)
    assert code == 0, output
    folder = run.path / "judge"
    assert {p.name for p in folder.iterdir()} == {
        "journal.jsonl",
        "results.json",
        "report.md",
        "report.html",
    }
    html = (folder / "report.html").read_text(encoding="utf-8")
    parser = _Assets()
    parser.feed(html)
    assert parser.external == []
    assert {"svg", "style", "table", "details"} <= parser.tags
    assert parser.headings == [
        "Outcomes",
        "Pass rate per criterion (judge)",
        "Deterministic checks",
        "Pass rate per expected category",
        "Pass rate per scenario (all repeats)",
        "Answers, one per scenario and repeat",
        "Assistant answers and timings",
        "Errors (never counted as FAIL)",
        "Answers in full",
    ]
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        ElementTree.fromstring(svg)  # noqa: S314 - our own report: every chart is well-formed
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert "| 12 | 0 | 0 | 12 | 100 % |" in markdown
