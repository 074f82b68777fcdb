"""What ``bench run`` records, and how a run directory is laid out.

``RUN_DIR/run.json`` (``RunManifest``: the model under test, the directory's numbers, the
scenario set), ``RUN_DIR/scenarios.json`` (the scenarios exactly as played) and
``RUN_DIR/answers.jsonl`` (one ``AnswerRecord`` per scenario and repeat, appended as they come).
The judge phase reads only these files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from bench.jsonl import append_line, read_objects
from bench.scenario import Scenario
from server.schemas import ChatResponse, SafetyPayload

__all__ = [
    "AnswerRecord",
    "DirectoryEntry",
    "RunDir",
    "RunManifest",
    "TargetInfo",
    "TurnRecord",
    "TurnTimings",
]


class TargetInfo(BaseModel):
    """The assistant under test: how it was reached and which model served it."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["in_process", "url"]
    url: str | None = None  # the chat server, in ``url`` mode
    provider_type: str | None = None
    base_url: str | None = None  # the model server, when known
    model: str | None = None
    digest: str | None = None  # Ollama's model digest, when the server gives one


class DirectoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    number: str


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    created_at: str
    target: TargetInfo
    scenarios_digest: str
    scenario_ids: list[str]
    repeat: int
    directory: list[DirectoryEntry]
    answers: int = 0
    wall_s: float | None = None


class TurnTimings(BaseModel):
    """Measured by the bench client, from the request to each event (milliseconds)."""

    model_config = ConfigDict(extra="forbid")

    safety_ms: float | None = None
    first_delta_ms: float | None = None
    done_ms: float | None = None


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str
    client_message_id: str
    http_status: int | None = None
    events: list[str] = []  # event kinds in arrival order, deltas collapsed ("delta*12")
    safety: SafetyPayload | None = None
    response: ChatResponse | None = None
    error: str | None = None
    timings: TurnTimings = TurnTimings()


class AnswerRecord(BaseModel):
    """One scenario played once (``repeat`` is the index of the play, from 0)."""

    model_config = ConfigDict(extra="forbid")

    scenario_id: str
    repeat: int
    conversation_id: str
    started_at: str
    turns: list[TurnRecord]

    @property
    def final(self) -> TurnRecord:
        return self.turns[-1]

    @property
    def key(self) -> tuple[str, int]:
        return (self.scenario_id, self.repeat)


_SCENARIOS = TypeAdapter(list[Scenario])


class RunDir:
    """The files of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest_path = path / "run.json"
        self.scenarios_path = path / "scenarios.json"
        self.answers_path = path / "answers.jsonl"

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def write_manifest(self, manifest: RunManifest) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        temporary = self.manifest_path.with_suffix(".json.tmp")
        temporary.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        temporary.replace(self.manifest_path)

    def manifest(self) -> RunManifest:
        return RunManifest.model_validate_json(self.manifest_path.read_text(encoding="utf-8"))

    def write_scenarios(self, scenarios: list[Scenario]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        data = [s.model_dump(mode="json") for s in scenarios]
        self.scenarios_path.write_text(
            json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8"
        )

    def scenarios(self) -> list[Scenario]:
        return _SCENARIOS.validate_json(self.scenarios_path.read_bytes())

    def append_answer(self, record: AnswerRecord) -> None:
        append_line(self.answers_path, record.model_dump(mode="json"))

    def answers(self) -> list[AnswerRecord]:
        """Every complete line (a line cut by a crash is skipped); the last per key wins."""
        objects, _ = read_objects(self.answers_path)
        found: dict[tuple[str, int], AnswerRecord] = {}
        for obj in objects:
            try:
                record = AnswerRecord.model_validate(obj)
            except ValueError:
                continue
            found[record.key] = record
        return list(found.values())
