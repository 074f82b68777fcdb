"""What the judge reads and must write back: the rubric prompt, the JSON schema, strict parsing.

The prompt comes from ``prompts/judge/`` (``rubric.md`` as the system message, ``case.md``
filled with one case). The judge's output is constrained by ``judge_schema`` (Ollama ``format``,
``response_format`` on OpenAI-compatible servers) and parsed by ``parse_verdicts``: JSON with
exactly the criteria asked, each ``{"raison": str, "verdict": "PASS" | "FAIL"}``, nothing
defaulted, no extra key, no duplicate key, no other spelling of a verdict. Anything else is a
``ParseFailure`` carrying its cause: never a verdict.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from bench.criteria import CRITERIA
from bench.scenario import Scenario
from llm.texts import prompt_text
from llm.types import Message

__all__ = [
    "Case",
    "ParseFailure",
    "Verdict",
    "build_messages",
    "judge_schema",
    "parse_verdicts",
    "rubric_hash",
]

SCHEMA_VERSION = "1"
REASON_MAX = 400
_FILES = ("judge/rubric.md", "judge/case.md")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class ParseFailure(ValueError):
    """The judge's text is not the JSON asked for; ``cause`` says how."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    raison: str = Field(max_length=REASON_MAX)
    verdict: Literal["PASS", "FAIL"]


@dataclass(frozen=True)
class Case:
    """One answer to grade, with what the judge needs to know of its situation."""

    scenario: Scenario
    earlier: tuple[tuple[str, str], ...]  # (person, assistant) turns before the last one
    last_message: str
    answer: str
    detected_category: str | None
    card: tuple[str, ...]  # names of the contacts on the card shown

    def digest(self) -> str:
        """The answer hash of the cache key: everything of the case the judge reads."""
        payload = {
            "scenario": self.scenario.model_dump(mode="json"),
            "earlier": self.earlier,
            "last": self.last_message,
            "answer": self.answer,
            "detected": self.detected_category,
            "card": self.card,
        }
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@cache
def rubric_hash() -> str:
    """Hash of the prompt files, the criteria's descriptions and the schema's version."""
    digest = hashlib.sha256()
    for name in _FILES:
        digest.update(prompt_text(name).encode() + b"\0")
    digest.update(json.dumps(CRITERIA, ensure_ascii=False, sort_keys=True).encode() + b"\0")
    digest.update(SCHEMA_VERSION.encode())
    return digest.hexdigest()[:16]


def judge_schema(criteria: Sequence[str]) -> dict[str, object]:
    """The JSON schema of the answer for ``criteria`` (reason first, then the verdict)."""
    item = {
        "type": "object",
        "properties": {
            "raison": {"type": "string", "maxLength": REASON_MAX},
            "verdict": {"type": "string", "enum": ["PASS", "FAIL"]},
        },
        "required": ["raison", "verdict"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": dict.fromkeys(criteria, item),
        "required": list(criteria),
        "additionalProperties": False,
    }


@cache
def _model(criteria: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = dict.fromkeys(criteria, (Verdict, ...))
    config = ConfigDict(extra="forbid", strict=True)
    return create_model("Verdicts", __config__=config, **fields)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ParseFailure(f"duplicate keys: {', '.join(repeated)}")
    return dict(pairs)


def parse_verdicts(
    text: str, criteria: Sequence[str], done_reason: str | None = None
) -> dict[str, Verdict]:
    """The verdict of every criterion, or ``ParseFailure``."""
    cut = " (output cut at num_predict)" if done_reason == "length" else ""
    if not text.strip():
        raise ParseFailure(f"empty output{cut}")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"not JSON: {exc.msg} at char {exc.pos}{cut}: {text[:80]!r}") from exc
    if not isinstance(data, dict):
        raise ParseFailure(f"not a JSON object: {type(data).__name__}")
    try:
        parsed = _model(tuple(criteria)).model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or '(root)'}: {error['msg']}"
            for error in exc.errors()[:6]
        ]
        more = f" (+{exc.error_count() - 6} more)" if exc.error_count() > 6 else ""
        raise ParseFailure("schema: " + "; ".join(problems) + more + cut) from exc
    return {criterion: getattr(parsed, criterion) for criterion in criteria}


def _frame(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def build_messages(case: Case, names: dict[str, str]) -> list[Message]:
    """The judge's messages for ``case``; ``names`` gives a contact's name by id."""
    scenario = case.scenario
    lines = []
    for person, assistant in case.earlier:
        lines.append(f"- Personne : « {_frame(person)} »")
        lines.append(f"- Assistant : « {_frame(assistant)} »")
    lines.append(f"- Personne (dernier message) : « {_frame(case.last_message)} »")

    def contacts(ids: Sequence[str]) -> str:
        return ", ".join(names.get(i, i) for i in ids) or "aucun en particulier"

    values = {
        "conversation": "\n".join(lines),
        "categorie_attendue": scenario.expected_category,
        "categorie_detectee": case.detected_category or "inconnue",
        "carte": ", ".join(case.card) or "aucune carte",
        "contacts_attendus": contacts(scenario.must_name),
        "contacts_a_eviter": contacts(scenario.must_not_name),
        "reponse": _frame(case.answer),
        "criteres": "\n".join(f"- {c} : {CRITERIA[c]}" for c in scenario.criteria),
    }
    user = _PLACEHOLDER.sub(
        lambda m: values.get(m.group(1), m.group(0)), prompt_text("judge/case.md")
    )
    return [Message("system", prompt_text("judge/rubric.md")), Message("user", user)]
