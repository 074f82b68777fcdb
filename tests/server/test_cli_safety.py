"""``nuisances safety ...`` through Typer's runner: real commands, real files."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from typer.testing import CliRunner

from server.cli import app

RUNNER = CliRunner()
CORPUS = Path(__file__).parents[1] / "corpus" / "safety" / "pub.jsonl"


def test_check_prints_category_rules_and_spans() -> None:
    result = RUNNER.invoke(app, ["safety", "check", "Ça pue le gaz, pas de fumée"])
    assert result.exit_code == 0, result.output
    assert "category: danger" in result.output
    assert "gaz.presence" in result.output
    assert "'pue' | 'gaz'" in result.output


def test_check_json() -> None:
    result = RUNNER.invoke(app, ["safety", "check", "--json", "je veux mourir"])
    payload = json.loads(result.output)
    assert payload["category"] == "detresse"
    assert payload["topics"] == ["suicide"]


def test_eval_ends_with_the_summary_figures() -> None:
    result = RUNNER.invoke(app, ["safety", "eval", str(CORPUS)])
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-4:]
    assert last[0].startswith("card recall per category")
    assert last[3].startswith("false alarms on clear 'rien' lines")


def test_eval_json_lists_ids() -> None:
    result = RUNNER.invoke(app, ["safety", "eval", str(CORPUS), "--json"])
    payload = json.loads(result.output)
    assert set(payload) >= {"card_recall", "misses", "false_alarms", "category_accuracy"}


def test_eval_with_candidate_rules_previews_the_change(tmp_path: Path) -> None:
    candidate = tmp_path / "rules"
    shutil.copytree(Path(str(resources.files("safety") / "rules")), candidate)
    (candidate / "gaz.yaml").write_text(
        (candidate / "gaz.yaml")
        .read_text(encoding="utf-8")
        .replace("cues: [gas, gas_sign]", "cues: [gas, rotten_egg]"),
        encoding="utf-8",
    )
    result = RUNNER.invoke(
        app, ["safety", "eval", str(CORPUS), "--rules", str(candidate), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert "pub-069" in payload["newly_missed"]  # "ça pue le gaz dans la cage d'escalier"
    assert payload["newly_caught"] == []


def test_eval_refuses_an_invalid_candidate(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("family: [", encoding="utf-8")
    result = RUNNER.invoke(app, ["safety", "eval", str(CORPUS), "--rules", str(tmp_path)])
    assert result.exit_code != 0
    assert "broken.yaml" in result.output


def test_eval_refuses_a_malformed_corpus(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "expected": "rien"}\nnot json\n', encoding="utf-8")
    result = RUNNER.invoke(app, ["safety", "eval", str(bad)])
    assert result.exit_code != 0
    assert "bad.jsonl:2" in result.output


def test_bench_prints_its_figures() -> None:
    result = RUNNER.invoke(app, ["safety", "bench", "--corpus", str(CORPUS), "--repeat", "1"])
    assert result.exit_code == 0, result.output
    assert "messages/s" in result.output
    assert "worst case over 10 KB adversarial inputs" in result.output


def _two_writers(tmp_path: Path) -> tuple[Path, Path]:
    corpus, team = tmp_path / "corpus", tmp_path / "team"
    corpus.mkdir()
    team.mkdir()
    for name in ("pub.jsonl", "gen.jsonl"):
        shutil.copy(CORPUS.parent / name, corpus / name)
    shutil.copy(CORPUS.parent / "sms.jsonl", team / "extra.jsonl")
    return corpus, team


def test_eval_cv_prints_each_writer_and_six_summary_lines(tmp_path: Path) -> None:
    corpus, team = _two_writers(tmp_path)
    result = RUNNER.invoke(app, ["safety", "eval", str(corpus), "--cv", "--team", str(team)])
    assert result.exit_code == 0, result.output
    assert "held-out writer gen:" in result.output
    assert "held-out writer pub:" in result.output
    summary = result.output.strip().splitlines()[-6:]
    assert summary[0].startswith("cross-validated over 2 writers")
    assert summary[-1].startswith("learned layer alone")


def test_eval_cv_json_has_the_figures_of_every_writer(tmp_path: Path) -> None:
    corpus, team = _two_writers(tmp_path)
    result = RUNNER.invoke(
        app, ["safety", "eval", str(corpus), "--cv", "--team", str(team), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert set(payload["writers"]) == {"pub", "gen"}
    assert 0.0 <= payload["recall"] <= 1.0


def test_eval_cv_needs_a_directory() -> None:
    result = RUNNER.invoke(app, ["safety", "eval", str(CORPUS), "--cv"])
    assert result.exit_code == 2  # a usage error, said in the output's error panel
    assert "needs a" in result.output


def test_train_writes_weights_and_check_compares_them(tmp_path: Path) -> None:
    corpus, team = _two_writers(tmp_path)
    out = tmp_path / "model.json"
    args = ["safety", "train", "--corpus", str(corpus), "--team", str(team), "--out", str(out)]
    written = RUNNER.invoke(app, args)
    assert written.exit_code == 0, written.output
    assert json.loads(out.read_text(encoding="utf-8"))["format"] == "nuisances-safety-linear/1"
    same = RUNNER.invoke(app, [*args, "--check"])
    assert same.exit_code == 0, same.output
    out.write_text(out.read_text(encoding="utf-8").replace('"threshold"', '"threshold" '))
    stale = RUNNER.invoke(app, [*args, "--check"])
    assert stale.exit_code == 1
    assert "differs from a fresh training" in stale.output
