"""A small set of answers labelled by people, to measure how far the judge agrees with them.

``bench/calibration/*.yaml``: a list of entries, each an answer to a single-message scenario,
written as the server would show it (contacts followed by their number), and a person's
``PASS``/``FAIL`` label for some of the scenario's criteria. The judge grades each entry like a
recorded answer (journaled, cached); Cohen's kappa then compares its verdicts with the labels,
per criterion and over all of them (``bench.summary``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from bench.criteria import CriterionId
from bench.rubric import Case
from bench.scenario import Scenario, ScenarioError
from directory.snapshot import Directory
from safety import detect

__all__ = ["CALIBRATION_DIR", "CalibrationEntry", "calibration_case", "load_calibration"]

CALIBRATION_DIR = Path(__file__).parent / "calibration"


class CalibrationEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,63}$")
    scenario: str
    answer: str = Field(min_length=1)
    labels: dict[CriterionId, Literal["PASS", "FAIL"]] = Field(min_length=1)
    note: str = ""


class _File(RootModel[list[CalibrationEntry]]):
    pass


def load_calibration(path: Path, scenarios: Sequence[Scenario]) -> list[CalibrationEntry]:
    """The entries of ``path`` (a file, or a folder of ``*.yaml``), checked against scenarios."""
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    by_id = {s.id: s for s in scenarios}
    entries: list[CalibrationEntry] = []
    for file in files:
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8")) or []
            entries.extend(_File.model_validate(data).root)
        except (OSError, yaml.YAMLError, ValidationError) as exc:
            raise ScenarioError(f"{file}: {exc}") from exc
    for entry in entries:
        scenario = by_id.get(entry.scenario)
        if scenario is None:
            raise ScenarioError(f"calibration {entry.id}: unknown scenario {entry.scenario!r}")
        if scenario.conversation is not None:
            raise ScenarioError(f"calibration {entry.id}: a conversation cannot be labelled")
        extra = sorted(set(entry.labels) - set(scenario.criteria))
        if extra:
            raise ScenarioError(
                f"calibration {entry.id}: not criteria of {scenario.id}: {', '.join(extra)}"
            )
    if len({e.id for e in entries}) != len(entries):
        raise ScenarioError(f"{path}: calibration ids must be unique")
    return entries


def calibration_case(entry: CalibrationEntry, scenario: Scenario) -> Case:
    """The case the judge reads: the detector's verdict and the card it would show."""
    detection = detect(scenario.turns[-1])
    card = Directory.national_only().card_for(detection.categories, detection.topics)
    return Case(
        scenario=scenario,
        earlier=(),
        last_message=scenario.turns[-1],
        answer=entry.answer,
        detected_category=detection.category,
        card=tuple(contact.name for contact in card),
    )
