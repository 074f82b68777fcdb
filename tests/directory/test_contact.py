"""``Contact``: which contacts validate, and why the others do not."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from directory.contact import CATEGORIES, TOPICS, Contact, fold
from safety.detect import CATEGORY_PRIORITY
from safety.ruleset import Topic as SafetyTopic
from tests.directory.helpers import contact_fields, local


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="a local mairie"),
        pytest.param(
            {"number": "18", "region": None, "kind": "urgence"}, id="a national short number"
        ),
        pytest.param({"number": "116 006", "kind": "service"}, id="a European 116 number"),
        pytest.param({"number": "0 800 47 33 33"}, id="a free 0800 number, spaced"),
        pytest.param({"number": "0590 82 00 00", "region": "971"}, id="Guadeloupe in its own plan"),
        pytest.param({"number": "0262 40 00 00", "region": "974"}, id="La Réunion in its own plan"),
        pytest.param({"region": "2A"}, id="Corse-du-Sud"),
        pytest.param({"region": "01"}, id="Ain, leading zero"),
        pytest.param({"region": "95"}, id="last metropolitan département"),
        pytest.param({"categories": [], "topics": []}, id="on no card"),
        pytest.param({"id": "a1"}, id="shortest slug"),
    ],
)
def test_valid_contacts(overrides: dict[str, Any]) -> None:
    contact = Contact.model_validate(contact_fields(**overrides))
    assert contact.dial == contact.number.replace(" ", "")
    assert contact.dial.isdigit()


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        pytest.param({"colour": "red"}, "Extra inputs", id="unknown field"),
        pytest.param({"number": "04-72-10-30-30"}, "malformed number", id="dashes"),
        pytest.param({"number": "04.72.10.30.30"}, "malformed number", id="dots"),
        pytest.param({"number": "+33 4 72 10 30 30"}, "malformed number", id="plus sign"),
        pytest.param({"number": "04  72"}, "malformed number", id="double space"),
        pytest.param({"number": "dix-huit"}, "malformed number", id="letters"),
        pytest.param({"number": ""}, "malformed number", id="empty"),
        pytest.param(
            {"number": "00 44 20 7946 0958"}, "not a valid French phone", id="a London number"
        ),
        pytest.param({"number": "04 72 10 30"}, "not a valid French phone", id="8 digits"),
        pytest.param({"number": "0590 82 00 00"}, "not a valid French phone", id="GP in Rhône"),
        pytest.param({"number": "999"}, "not a valid French short", id="UK emergency"),
        pytest.param({"number": "1234"}, "not a valid French short", id="unknown short"),
        pytest.param({"number": "10"}, "not a valid French short", id="two digits"),
        pytest.param({"id": "Mairie"}, "bad id", id="capital in slug"),
        pytest.param({"id": "mairie_lyon"}, "bad id", id="underscore in slug"),
        pytest.param({"id": "-mairie"}, "bad id", id="slug starts with a hyphen"),
        pytest.param({"id": "m"}, "bad id", id="slug too short"),
        pytest.param({"id": "m" * 64}, "bad id", id="slug too long"),
        pytest.param({"region": "20"}, "bad département", id="20 no longer exists"),
        pytest.param({"region": "96"}, "bad département", id="96 does not exist"),
        pytest.param({"region": "2a"}, "bad département", id="lowercase Corsica"),
        pytest.param({"region": "977"}, "bad département", id="Saint-Barthélemy is no département"),
        pytest.param({"region": "1"}, "bad département", id="missing leading zero"),
        pytest.param({"region": None}, "needs a region", id="local kind without region"),
        pytest.param({"kind": "mairie"}, "Input should be", id="unknown kind"),
        pytest.param({"categories": ["rien"]}, "Input should be", id="rien is no card"),
        pytest.param({"categories": ["danger", "danger"]}, "duplicate category", id="twice"),
        pytest.param({"topics": ["bruit"]}, "Input should be", id="unknown topic"),
        pytest.param({"aliases": ["Mairie", "mairie"]}, "repeats", id="alias repeated"),
        pytest.param({"aliases": ["--"]}, "no letter", id="alias of punctuation"),
        pytest.param({"name": "  "}, "at least 1", id="blank name"),
        pytest.param({"categories": "danger"}, "valid tuple", id="categories not a list"),
    ],
)
def test_invalid_contacts(overrides: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Contact.model_validate(contact_fields(**overrides))


@pytest.mark.parametrize(
    "missing", ["id", "name", "number", "kind", "description", "hours", "categories"]
)
def test_required_fields(missing: str) -> None:
    fields = contact_fields()
    del fields[missing]
    with pytest.raises(ValidationError, match="Field required"):
        Contact.model_validate(fields)


def test_categories_and_topics_are_stored_in_vocabulary_order() -> None:
    contact = local(categories=["represailles", "danger"], topics=["menace", "gaz"])
    assert contact.categories == ("danger", "represailles")
    assert contact.topics == ("gaz", "menace")


def test_contact_is_frozen_and_dial_is_serialised() -> None:
    contact = local()
    with pytest.raises(ValidationError):
        contact.name = "autre"  # type: ignore[misc]
    assert contact.model_dump()["dial"] == "0472103030"
    assert "dial" not in contact.record()


def test_vocabularies_match_the_detector() -> None:
    assert get_args(SafetyTopic) == TOPICS
    assert CATEGORIES == CATEGORY_PRIORITY


@pytest.mark.parametrize(
    ("written", "key"),
    [
        pytest.param("SOS Amitié", "sos amitie", id="accent and case"),
        pytest.param("sapeurs-pompiers", "sapeurs pompiers", id="hyphen"),
        pytest.param("  Allô  Enfance ", "allo enfance", id="spaces"),
        pytest.param("l’hôtel de ville", "l hotel de ville", id="typographic apostrophe"),
        pytest.param("ＳＡＭＵ", "samu", id="full-width letters"),
    ],
)
def test_fold(written: str, key: str) -> None:
    assert fold(written) == key
