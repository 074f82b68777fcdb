"""What the model writes reaches the client safe, in every delta: answers forced through the
fake Ollama (a real HTTP server), streamed in chunks of every size."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm.audit import AuditLog
from llm.turn import Harness, TurnRequest
from llm.validate import validate
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama
from tests.llm.test_turn import _assistant, _run

pytestmark = pytest.mark.anyio
NOISE = TurnRequest("le voisin fait du bruit la nuit")
SAFE = "Notez chaque épisode dans le journal, puis écrivez au bailleur."

# (a poisoned answer, what must never appear in a delta nor in the result)
POISONED = [
    ("Appelez le **06** 12 34 **56** 78 ce soir.", ["06", "12 34", "56 78", "1234"]),
    ("<script>alert(1)</script>Notez tout.", ["<script", "alert(1)</"]),
    ("Voir [ici](javascript:alert(1)).", ["javascript", "]("]),
    ("&lt;img src=x onerror=alert(1)&gt; Notez.", ["&lt;img", "onerror"]),
    ("＜script＞alert(1)＜/script＞ Notez.", ["＜script"]),
    ("Le syndic : zéro six, douze, trente-quatre, cinquante-six, soixante-dix-huit.", ["douze"]),
    ("Au Québec, le (514) 555-0162 répond.", ["555", "0162"]),
    ("Aux États-Unis, appelez le 911.", ["911"]),
    ("Voir https://exemple.com/bruit ou www.exemple.org.", ["https", "www.", "exemple"]),
    ("```\nrm -rf /\n```", ["```"]),
]


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    """One per test: an answer scripted for a retry that did not happen never serves the
    next test."""
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


@pytest.mark.parametrize("chunk", [1, 2, 5, 13])
@pytest.mark.parametrize(("answer", "never"), POISONED, ids=[a[:24] for a, _ in POISONED])
async def test_no_delta_carries_a_number_or_markup(
    fake: FakeOllama, answer: str, never: list[str], chunk: int
) -> None:
    fake.enqueue(Behaviour.normal(answer, chunk_size=chunk))
    fake.enqueue(Behaviour.normal(SAFE, chunk_size=chunk))  # the retry, when there is one
    deltas, result = await _run(_assistant(fake.url), NOISE)
    streamed = "".join(deltas)
    for part in never:
        assert part not in streamed, (part, streamed)
        assert part not in result.text, (part, result.text)
    if not result.partial_discarded:
        assert streamed == result.text
    assert result.text


async def test_the_result_and_the_audit_line_count_what_was_taken_out(
    fake: FakeOllama, tmp_path: Path
) -> None:
    fake.enqueue(Behaviour.normal("Le **06** 12 34 **56** 78 ou le 07 11 22 33 44, notez."))
    audit = AuditLog(tmp_path / "audit.jsonl")
    _, result = await _run(_assistant(fake.url, harness=Harness(audit=audit)), NOISE)
    line = audit.last()[0]
    assert (line["masked_numbers"], line["markup_removed"]) == (2, 0)
    assert result.masked_numbers == 2
    assert result.markup_removed == 0
    assert result.text.count("[numéro masqué]") == 2
    assert not re.search(r"\d{2} \d{2} \d{2}", result.text)


VALIDATION = [
    ("javascript:alert(document.cookie)", "lien web"),
    ("Lisez [ceci][1].\n[1]: javascript:alert(1)", "lien markdown"),
    ("data:text/html;base64,PHNjcmlwdD4=", "lien web"),
    ("Voyez sur exemple-bruit.fr pour plus.", "lien web"),
    ("&lt;script&gt;alert(1)&lt;/script&gt; Notez tout.", "balise HTML"),
    ("＜script＞alert(1)＜/script＞ Notez tout.", "balise HTML"),
    ("Écrivez à syndic@exemple.fr pour cela.", "adresse e-mail"),
]


@pytest.mark.parametrize(("answer", "kind"), VALIDATION, ids=[k for _, k in VALIDATION])
def test_validation_refuses_what_used_to_pass(answer: str, kind: str) -> None:
    errors = validate(answer, lambda _: True)
    assert any(kind in error for error in errors), errors
