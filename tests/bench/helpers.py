"""Builders for the bench tests: scenarios, recorded answers, run directories, judge output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.records import (
    AnswerRecord,
    DirectoryEntry,
    RunDir,
    RunManifest,
    TargetInfo,
    TurnRecord,
)
from bench.scenario import Scenario
from directory.national import national_contacts
from llm.fallback import EMERGENCY_LINE
from server.schemas import CardContact, ChatResponse, SafetyPayload, TimingsPayload

ASSISTANT_MODEL = "qwen2.5:0.5b-instruct"
JUDGE_MODEL = "juge-7b:latest"
CRITERIA = ("repond_a_la_question", "etapes_concretes")
DIRECTORY = [DirectoryEntry(id=c.id, name=c.name, number=c.number) for c in national_contacts()]


def scenario(**overrides: Any) -> Scenario:
    values: dict[str, Any] = {
        "id": "bruit-nuit",
        "title": "Bruit la nuit",
        "message": "Mon voisin fait du bruit toutes les nuits, que faire ?",
        "expected_category": "rien",
        "criteria": list(CRITERIA),
    }
    values.update(overrides)
    return Scenario.model_validate(values)


def card(*ids: str) -> list[CardContact]:
    by_id = {c.id: c for c in national_contacts()}
    return [CardContact.of(by_id[i]) for i in ids]


def response(
    text: str,
    *,
    category: str = "rien",
    card_ids: Sequence[str] = (),
    source: str = "llm",
    status: str = "ok",
    contacts: Sequence[str] = (),
    total_ms: float = 1200.0,
) -> ChatResponse:
    by_id = {c.id: c for c in national_contacts()}
    return ChatResponse(
        conversation_id="c",
        client_message_id="m",
        turn_id=1,
        safety=SafetyPayload(
            category=category,
            categories=[] if category == "rien" else [category],
            topics=[],
            rules=[],
            card=card(*card_ids),
        ),
        text=text,
        source=source,
        status=status,
        contacts=[{"id": i, "name": by_id[i].name, "number": by_id[i].number} for i in contacts],
        model=ASSISTANT_MODEL,
        prompt_hash="0" * 16,
        timings=TimingsPayload(detection_ms=0.1, first_token_ms=300.0, total_ms=total_ms),
    )


def record(
    answer: ChatResponse | None,
    *,
    scenario_id: str = "bruit-nuit",
    repeat: int = 0,
    message: str = "Mon voisin fait du bruit toutes les nuits, que faire ?",
    events: Sequence[str] = ("safety", "delta*3", "done"),
    error: str | None = None,
) -> AnswerRecord:
    turn = TurnRecord(
        message=message,
        client_message_id=f"m-{scenario_id}-{repeat}",
        http_status=200,
        events=list(events) if answer is not None else ["safety"],
        safety=answer.safety if answer is not None else None,
        response=answer,
        error=error,
    )
    return AnswerRecord(
        scenario_id=scenario_id,
        repeat=repeat,
        conversation_id=f"c-{scenario_id}-{repeat}",
        started_at="2025-01-01T00:00:00+00:00",
        turns=[turn],
    )


GOOD_TEXT = (
    "Notez chaque nuit dans le journal, puis parlez-en à votre voisin. Si le bruit continue "
    "après 22 h, la police peut constater le tapage nocturne."
)
FALLBACK_TEXT = f"L'assistant n'est pas disponible pour le moment.\n\n{EMERGENCY_LINE}"


def make_run(
    path: Path,
    scenarios: Sequence[Scenario],
    *,
    repeat: int = 1,
    model: str = ASSISTANT_MODEL,
    texts: dict[str, str] | None = None,
) -> RunDir:
    """A run directory as ``bench run`` writes it, with one answer per scenario and repeat."""
    run_dir = RunDir(path)
    run_dir.write_manifest(
        RunManifest(
            run_id="testrun",
            created_at="2025-01-01T00:00:00+00:00",
            target=TargetInfo(
                mode="in_process",
                provider_type="ollama",
                base_url="http://127.0.0.1:11434",
                model=model,
            ),
            scenarios_digest="x",
            scenario_ids=[s.id for s in scenarios],
            repeat=repeat,
            directory=DIRECTORY,
        )
    )
    run_dir.write_scenarios(list(scenarios))
    for index in range(repeat):
        for one in scenarios:
            text = (texts or {}).get(one.id, GOOD_TEXT)
            run_dir.append_answer(
                record(
                    response(text),
                    scenario_id=one.id,
                    repeat=index,
                    message=one.turns[-1],
                )
            )
    return run_dir


def verdicts_json(criteria: Sequence[str] = CRITERIA, verdict: str = "PASS") -> str:
    return json.dumps(
        {c: {"raison": "La réponse convient.", "verdict": verdict} for c in criteria},
        ensure_ascii=False,
    )


def three_scenarios() -> list[Scenario]:
    return [
        scenario(id="bruit-nuit"),
        scenario(id="chien-aboie", message="Le chien du voisin aboie toute la journée."),
        scenario(id="perceuse", message="Perceuse le dimanche matin, c'est permis ?"),
    ]
