"""The scenario files: the shipped set, and what the schema refuses (one row per reason)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bench.calibration import CALIBRATION_DIR, load_calibration
from bench.criteria import CRITERIA
from bench.scenario import SCENARIOS_DIR, ScenarioError, load_scenarios
from server.cli import app


def test_the_shipped_set_is_large_and_covers_every_category() -> None:
    scenarios = load_scenarios()
    counts = Counter(s.expected_category for s in scenarios)
    assert len(scenarios) >= 40
    assert counts["rien"] >= 15
    assert all(counts[c] >= 6 for c in ("danger", "represailles", "detresse"))
    assert sum(1 for s in scenarios if s.conversation) >= 4


def test_every_scenario_names_contacts_and_criteria_from_closed_lists() -> None:
    for scenario in load_scenarios():
        assert set(scenario.criteria) <= set(CRITERIA), scenario.id
        if scenario.expected_category != "rien":
            assert scenario.must_name, f"{scenario.id}: a risk scenario names its contact"


def test_only_selects_and_unknown_ids_are_refused() -> None:
    chosen = load_scenarios(only=["gaz-cage-escalier", "tapage-nocturne-police"])
    assert {s.id for s in chosen} == {"gaz-cage-escalier", "tapage-nocturne-police"}
    with pytest.raises(ScenarioError, match="unknown scenario ids: nope"):
        load_scenarios(only=["nope"])


def test_the_example_calibration_set_loads() -> None:
    entries = load_calibration(CALIBRATION_DIR, load_scenarios())
    assert len(entries) >= 10
    labels = Counter(label for e in entries for label in e.labels.values())
    assert labels["PASS"] > 5
    assert labels["FAIL"] > 5


BASE: dict[str, Any] = {
    "id": "ok-scenario",
    "title": "Un titre",
    "message": "Un message",
    "expected_category": "rien",
    "criteria": ["repond_a_la_question"],
}


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"extra": 1}, "Extra inputs are not permitted"),  # extra="forbid"
        ({"criteria": ["sympathique"]}, "criteria"),  # closed list of criteria
        ({"criteria": []}, "criteria"),  # at least one criterion
        ({"must_name": ["sos-voisins"]}, "unknown contact ids: sos-voisins"),  # directory ids
        ({"must_name": ["police"], "must_not_name": ["police"]}, "both must_name"),
        ({"conversation": ["a", "b"]}, "exactly one of"),  # message and conversation
        ({"message": None}, "exactly one of"),  # neither
        ({"message": None, "conversation": ["seul"]}, "conversation"),  # at least two turns
        ({"expected_category": "urgence"}, "expected_category"),  # closed list of categories
        ({"id": "Avec Espaces"}, "id"),  # slug ids
        ({"criteria": ["en_francais", "en_francais"]}, "listed twice"),
        ({"min_chars": 500, "max_chars": 100}, "min_chars exceeds"),
    ],
)
def test_invalid_scenarios_are_refused(tmp_path: Path, change: dict[str, Any], error: str) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump([{**BASE, **change}]), encoding="utf-8")
    with pytest.raises(ScenarioError, match=error):
        load_scenarios(tmp_path)


def test_duplicate_ids_across_files_are_refused(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(yaml.safe_dump([BASE]), encoding="utf-8")
    with pytest.raises(ScenarioError, match="already in"):
        load_scenarios(tmp_path)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no scenario file"):
        load_scenarios(tmp_path)


def test_the_scenario_folder_is_the_package_one() -> None:
    assert Path(__file__).parents[2] / "bench" / "scenarios" == SCENARIOS_DIR


def test_the_scenarios_command_counts_per_category() -> None:
    result = CliRunner().invoke(app, ["bench", "scenarios"])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"{len(load_scenarios())} scenarios: ")
    assert "[danger, 2 turns]" in result.output
