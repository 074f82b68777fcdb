"""Rule files are validated whole: a bad file is refused with the file and the reason."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from safety.keys import index_keys
from safety.ruleset import SPECIAL_TERMS, RuleSetError, default_ruleset, load_ruleset

SHIPPED = Path(str(resources.files("safety") / "rules"))


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    target = tmp_path / "rules"
    shutil.copytree(SHIPPED, target)
    return target


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


BAD_RULE = """
  - id: gaz.bad
    category: danger
    topics: [gaz]
    description: A rule written wrong on purpose.
    cues: [gas]
"""


@pytest.mark.parametrize(
    ("addition", "message"),
    [
        pytest.param(BAD_RULE + "    colour: red\n", "Extra inputs", id="unknown field"),
        pytest.param(BAD_RULE.replace("[gas]", "[nothing]"), "unknown term", id="unknown term"),
        pytest.param(BAD_RULE.replace("danger", "panic"), "category", id="unknown category"),
        pytest.param(BAD_RULE.replace("[gaz]", "[meteo]"), "topics", id="unknown topic"),
        pytest.param(BAD_RULE.replace("gaz.bad", "gaz.presence"), "already", id="duplicate id"),
        pytest.param(
            BAD_RULE.replace("gaz.bad", "feu.bad"), "must start", id="id of another family"
        ),
        pytest.param(
            BAD_RULE.replace("[gas]", "[negation]"), "cannot use", id="engine class as cue"
        ),
    ],
)
def test_invalid_rule_is_refused(rules_dir: Path, addition: str, message: str) -> None:
    _append(rules_dir / "gaz.yaml", addition)
    with pytest.raises(RuleSetError, match=message) as caught:
        load_ruleset(rules_dir)
    assert "gaz.yaml" in str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param("\\bgaz", "literal", id="no literal prefix"),
        pytest.param("(?:gaz)?\\w", "optional", id="optional leading group"),
        pytest.param("gaz{e<=1}", "subset", id="fuzzy syntax outside the fuzzy field"),
        pytest.param("ga(?>z)", "subset", id="atomic group"),
        pytest.param("gaz++", "subset", id="possessive quantifier"),
        pytest.param("brûlé", "accents", id="accents never match normalised text"),
        pytest.param("ga(z", "unbalanced|missing", id="does not compile"),
        pytest.param(
            "feu(?<!un tres tres tres tres tres long feu)", "lookbehind", id="long lookbehind"
        ),
    ],
)
def test_invalid_pattern_is_refused(rules_dir: Path, pattern: str, message: str) -> None:
    term = f"\n  bad_term:\n    patterns:\n      - '{pattern}'\n"
    text = (rules_dir / "gaz.yaml").read_text(encoding="utf-8")
    (rules_dir / "gaz.yaml").write_text(text.replace("terms:\n", "terms:" + term, 1), "utf-8")
    with pytest.raises(RuleSetError, match=message):
        load_ruleset(rules_dir)


def test_not_yaml_is_refused(rules_dir: Path) -> None:
    _append(rules_dir / "gaz.yaml", "\n  - [unclosed\n")
    with pytest.raises(RuleSetError, match=r"gaz\.yaml: not valid YAML"):
        load_ruleset(rules_dir)


def test_every_term_is_used_by_a_rule() -> None:
    ruleset = default_ruleset()
    used = {name for rule in ruleset.rules for name in rule.cues}
    used |= {name for rule in ruleset.rules for name, _ in rule.unless}
    assert set(ruleset.terms) - used - SPECIAL_TERMS == set()


def test_shipped_families_are_the_ones_the_issue_lists() -> None:
    assert set(default_ruleset().families) == {
        "gaz", "feu", "electricite", "co", "blessure", "violence", "arme", "structure",
        "menace", "suicide", "automutilation",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("pattern", "keys"),
    [
        pytest.param("pue\\b", {"pue"}, id="a word"),
        pytest.param("(?:pue|pu)\\b", {"pue", "pu"}, id="leading group expanded"),
        pytest.param("siffl\\w*", {"siffl"}, id="partial word"),
        pytest.param(
            "(?:me |m')(?:coupe|bat)\\b",
            {"me coupe", "me bat", "m'coupe", "m'bat"},
            id="inner group",
        ),
        pytest.param("gazs?\\b", {"gaz"}, id="quantified last letter is dropped"),
        pytest.param("au secours tout de suite", {"au secours"}, id="capped at ten characters"),
    ],
)
def test_index_keys(pattern: str, keys: set[str]) -> None:
    assert index_keys(pattern) == keys
