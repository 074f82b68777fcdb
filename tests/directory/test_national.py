"""The national contacts shipped in ``directory/data/national.yaml``."""

from __future__ import annotations

import re
from pathlib import Path

import phonenumbers
import pytest
from phonenumbers import shortnumberinfo

from directory.card import CARD_IDS, card_ids
from directory.contact import CATEGORIES, TOPICS, Contact
from directory.io import ContactFileError, parse_contacts
from directory.national import national_contacts

# The numbers DESIGN.md and the brief name, by id.
EXPECTED_NUMBERS = {
    "urgence-europeenne": "112",
    "samu": "15",
    "police": "17",
    "pompiers": "18",
    "urgence-sms": "114",
    "prevention-suicide": "3114",
    "grdf": "0 800 47 33 33",
    "france-victimes": "116 006",
    "violences-femmes": "3919",
    "enfance-en-danger": "119",
    "sos-amitie": "09 72 39 40 50",
    "medecin-de-garde": "116 117",
    "samu-social": "115",
    "urgence-aeronautique": "191",
    "sauvetage-en-mer": "196",
    "alerte-attentat": "197",
}
# Which category a topic's card is built under.
TOPIC_HOMES = {
    **dict.fromkeys(TOPICS, ("danger",)),
    "enfant": ("danger", "represailles"),
    "menace": ("represailles",),
    "suicide": ("detresse",),
    "automutilation": ("detresse",),
}


def test_every_national_number_is_there() -> None:
    assert {c.id: c.number for c in national_contacts()} == EXPECTED_NUMBERS


def test_loaded_once() -> None:
    assert national_contacts() is national_contacts()


@pytest.mark.parametrize("contact", national_contacts(), ids=lambda c: c.id)
def test_numbers_are_valid_for_phonenumbers_without_allow_list(contact: Contact) -> None:
    parsed = phonenumbers.parse(contact.dial, "FR")
    if len(contact.dial) <= 6:
        assert shortnumberinfo.is_valid_short_number_for_region(parsed, "FR")
    else:
        assert phonenumbers.is_valid_number_for_region(parsed, "FR")


@pytest.mark.parametrize("contact", national_contacts(), ids=lambda c: c.id)
def test_names_and_aliases_hold_no_number(contact: Contact) -> None:
    """The model is given names, never numbers."""
    for text in (contact.name, *contact.aliases):
        assert not any(ch.isdigit() for ch in text)


def test_categories_and_topics_say_which_cards_show_the_contact() -> None:
    for contact in national_contacts():
        categories = {
            c
            for c in CATEGORIES
            for topics in [(), *((t,) for t in TOPICS)]
            if contact.id in card_ids([c], topics)
        }
        topics = {t for t in TOPICS for c in TOPIC_HOMES[t] if contact.id in card_ids([c], [t])}
        assert set(contact.categories) == categories, contact.id
        assert set(contact.topics) == topics, contact.id
        assert (contact.id in CARD_IDS) == bool(categories)


NATIONAL = """\
- id: samu
  name: SAMU
  number: 15
  kind: urgence
  description: Urgence médicale.
  hours: 24 h/24
  categories: [danger]
"""


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        pytest.param(NATIONAL + NATIONAL.replace("- id", "\n- id"), 9, "duplicate id", id="dup"),
        pytest.param(NATIONAL + "  region: 75\n", 8, "national contact has no region", id="rg"),
        pytest.param(NATIONAL.replace("15", "1515"), 3, "not a valid French short", id="num"),
    ],
)
def test_a_broken_national_file_names_the_entry(text: str, line: int, reason: str) -> None:
    with pytest.raises(ContactFileError, match=reason) as caught:
        parse_contacts(text, "national.yaml", scope="national")
    assert caught.value.line == line
    assert caught.value.contact_id == "samu"


def test_every_contact_tag_in_the_prompts_is_a_national_contact() -> None:
    """The prompts name contacts as ``[[id]]``; an unknown id would be dropped from the text."""
    prompts = Path(__file__).parents[2] / "prompts"
    tags = {
        (path.relative_to(prompts).as_posix(), tag)
        for path in prompts.rglob("*.md")
        for tag in re.findall(r"\[\[\s*([A-Za-z0-9_-]+)\s*\]\]", path.read_text(encoding="utf-8"))
    }
    ids = {contact.id for contact in national_contacts()}
    assert sorted((where, tag) for where, tag in tags if tag not in ids) == []
