"""The detector on hostile input: never raises, never runs away (ReDoS guard), portable rules.

No timing is asserted here: the guard gives the detector ten times its default budget and
checks the *outcome*, that no input made it give up (``safety.timeout``). Figures come from
``nuisances safety bench``.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safety import detect
from safety.adversarial import adversarial_inputs
from safety.ruleset import default_ruleset

GENEROUS = 0.5  # seconds: ten times the default budget
RULESET = default_ruleset()
ADVERSARIAL = list(adversarial_inputs(RULESET))


@pytest.mark.parametrize(("name", "text"), ADVERSARIAL, ids=[name for name, _ in ADVERSARIAL])
def test_detector_finishes_on_adversarial_input(name: str, text: str) -> None:
    detection = detect(text, budget_s=GENEROUS)
    assert "safety.timeout" not in detection.rules
    assert "safety.error" not in detection.rules


def _patterns() -> list[tuple[str, str]]:
    return [
        (name, pattern.pattern) for name, term in RULESET.terms.items() for pattern in term.patterns
    ]


def test_every_pattern_survives_its_own_worst_input() -> None:
    """Each pattern, matched on 10 KB built from its own literal prefix (spaced and glued):
    catastrophic backtracking shows in one match, from the start of such a text."""
    from safety.keys import index_keys

    for term in RULESET.terms.values():
        for compiled in term.patterns:
            for key in index_keys(compiled.pattern):
                for text in ((key + " ") * (10_240 // (len(key) + 1)), key * (10_240 // len(key))):
                    compiled.match(text, 0, timeout=GENEROUS)  # raises TimeoutError


@given(st.text(max_size=10_240))
@settings(max_examples=60, deadline=None)
def test_detect_never_raises_on_arbitrary_unicode(text: str) -> None:
    detection = detect(text, budget_s=GENEROUS)
    assert detection.category in ("danger", "represailles", "detresse", "rien")
    assert "safety.error" not in detection.rules
    assert "safety.timeout" not in detection.rules


def test_detect_survives_surrogates_and_nul() -> None:
    detection = detect("\ud800 gaz \x00 pue \udfff")
    assert "safety.error" not in detection.rules


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is needed to check ECMAScript")
def test_every_pattern_compiles_as_ecmascript() -> None:
    """The mobile client can run the same rule files: every pattern is valid ECMAScript."""
    script = (
        "const ps = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
        "for (const p of ps) { try { new RegExp(p, 'u'); }"
        " catch (e) { bad.push(p + ': ' + e.message); } }"
        "console.log(JSON.stringify(bad));"
    )
    patterns = [source for _, source in _patterns()]
    result = subprocess.run(  # noqa: S603 - our own script, our own patterns
        ["node", "-e", script],  # noqa: S607 - a test tool found on PATH
        input=json.dumps(patterns),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout) == []
