"""Scenarios as data: ``bench/scenarios/*.yaml``, validated by pydantic (``extra="forbid"``).

Each file is a list of scenarios. A scenario is one message, or a short conversation (the
person's messages, sent in order in one conversation, so the assistant sees its own earlier
answers as history); the last answer is the one graded. ``expected_category`` is what the
emergency detector should say of the last message; ``must_name`` and ``must_not_name`` are
contact ids of the national directory; ``criteria`` are ids from ``bench.criteria``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from bench.criteria import CriterionId
from directory.national import national_ids

__all__ = [
    "SCENARIOS_DIR",
    "Category",
    "Scenario",
    "ScenarioError",
    "load_scenarios",
    "scenarios_digest",
]

SCENARIOS_DIR = Path(__file__).parent / "scenarios"
Category = Literal["danger", "represailles", "detresse", "rien"]
_ID = r"^[a-z0-9][a-z0-9-]{1,63}$"


class ScenarioError(ValueError):
    """A scenario file that does not validate, named with its path."""


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=_ID)
    title: str = Field(min_length=3)
    message: str | None = Field(default=None, min_length=1, max_length=2000)
    conversation: tuple[str, ...] | None = Field(default=None, min_length=2, max_length=4)
    expected_category: Category
    must_name: tuple[str, ...] = ()
    must_not_name: tuple[str, ...] = ()
    criteria: tuple[CriterionId, ...] = Field(min_length=1)
    region: str | None = None
    min_chars: int = Field(default=40, ge=0)
    max_chars: int = Field(default=1600, ge=1)
    why: str = ""  # what makes the scenario hard, for the reader of the report

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if (self.message is None) == (self.conversation is None):
            raise ValueError("give exactly one of 'message' or 'conversation'")
        if self.conversation is not None and any(not t.strip() for t in self.conversation):
            raise ValueError("a conversation turn is empty")
        known = national_ids()
        unknown = sorted({*self.must_name, *self.must_not_name} - known)
        if unknown:
            raise ValueError(f"unknown contact ids: {', '.join(unknown)}")
        both = sorted(set(self.must_name) & set(self.must_not_name))
        if both:
            raise ValueError(f"both must_name and must_not_name: {', '.join(both)}")
        if len(set(self.criteria)) != len(self.criteria):
            raise ValueError("a criterion is listed twice")
        if self.min_chars > self.max_chars:
            raise ValueError("min_chars exceeds max_chars")
        return self

    @property
    def turns(self) -> tuple[str, ...]:
        """The person's messages, in order (one for a single message)."""
        return self.conversation if self.conversation is not None else (self.message or "",)


class _ScenarioFile(RootModel[list[Scenario]]):
    pass


def _parse(path: Path) -> list[Scenario]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return _ScenarioFile.model_validate(data if data is not None else []).root
    except (yaml.YAMLError, ValidationError) as exc:
        raise ScenarioError(f"{path}: {exc}") from exc


def load_scenarios(directory: Path = SCENARIOS_DIR, only: Iterable[str] = ()) -> list[Scenario]:
    """Every scenario of ``directory/*.yaml`` (files in name order), or those of ``only``."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ScenarioError(f"{directory}: no scenario file (*.yaml)")
    scenarios: list[Scenario] = []
    seen: dict[str, Path] = {}
    for path in files:
        for scenario in _parse(path):
            if scenario.id in seen:
                raise ScenarioError(f"{path}: id {scenario.id!r} already in {seen[scenario.id]}")
            seen[scenario.id] = path
            scenarios.append(scenario)
    wanted = list(only)
    if wanted:
        missing = sorted(set(wanted) - set(seen))
        if missing:
            raise ScenarioError(f"unknown scenario ids: {', '.join(missing)}")
        scenarios = [s for s in scenarios if s.id in wanted]
    return scenarios


def scenarios_digest(scenarios: Sequence[Scenario]) -> str:
    """A short hash of the scenarios as played (ids, turns, expectations, criteria)."""
    payload = [s.model_dump(mode="json") for s in scenarios]
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
