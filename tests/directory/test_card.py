"""The card: which contacts, in which order, for what the detector fired; and ``find``."""

from __future__ import annotations

import pytest

from directory.contact import Contact
from directory.national import national_contacts
from directory.snapshot import Directory
from tests.directory.helpers import local

LYON_MAIRIE = local()  # represailles, topic menace, Rhône
LYON_ANTIPOISON = local(
    id="antipoison-lyon",
    name="Centre antipoison de Lyon",
    number="04 72 11 69 11",
    categories=["danger"],
    topics=["co"],
    aliases=["antipoison"],
)
LYON_BAILLEUR = local(
    id="bailleur-lyon",
    name="Bailleur social de Lyon",
    number="04 72 00 00 01",
    categories=["danger", "represailles"],
    topics=["structure"],
    aliases=["bailleur"],
)
MARSEILLE_MAIRIE = local(
    id="mairie-marseille",
    name="Mairie de Marseille",
    number="04 91 55 11 11",
    region="13",
    categories=["represailles"],
    aliases=["mairie"],
)
DIRECTORY = Directory(
    national_contacts(), [LYON_MAIRIE, LYON_ANTIPOISON, LYON_BAILLEUR, MARSEILLE_MAIRIE]
)


def numbers(card: list[Contact]) -> list[str]:
    return [contact.number for contact in card]


@pytest.mark.parametrize(
    ("categories", "topics", "expected"),
    [
        pytest.param(["danger"], ["gaz"], ["18", "0 800 47 33 33", "112"], id="gas"),
        pytest.param(["danger"], ["feu"], ["18", "112"], id="fire"),
        pytest.param(["danger"], ["co"], ["18", "15", "112"], id="carbon monoxide"),
        pytest.param(["danger"], ["electricite"], ["18", "112"], id="electrical hazard"),
        pytest.param(["danger"], ["structure"], ["18", "112"], id="collapse"),
        pytest.param(["danger"], ["blessure"], ["15", "112"], id="injury"),
        pytest.param(
            ["danger"], ["violence"], ["17", "112", "3919", "114"], id="violence: 3919, SMS 114"
        ),
        pytest.param(
            ["danger"], ["violence", "enfant"], ["17", "112", "119", "114"], id="child: 119"
        ),
        pytest.param(["danger"], ["arme"], ["17", "112"], id="weapon"),
        pytest.param(
            ["danger"], [], ["112", "15", "17", "18", "114"], id="danger with no topic (timeout)"
        ),
        pytest.param(
            ["detresse"], ["suicide"], ["3114", "15", "112", "114"], id="suicidal ideation"
        ),
        pytest.param(
            ["detresse"], ["automutilation"], ["3114", "15", "112", "114"], id="self-harm"
        ),
        pytest.param(["detresse"], [], ["3114", "15", "112", "114"], id="distress, no topic"),
        pytest.param(["represailles"], ["menace"], ["17", "116 006", "112"], id="threats"),
        pytest.param(
            ["represailles"],
            ["menace", "enfant"],
            ["17", "116 006", "112", "119"],
            id="threat against a child adds the 119",
        ),
        pytest.param(["rien"], [], [], id="rien: no card"),
        pytest.param([], ["gaz"], [], id="nothing fired: no card"),
        pytest.param(["danger"], ["bruit"], ["112", "15", "17", "18", "114"], id="unknown topic"),
    ],
)
def test_card_order(categories: list[str], topics: list[str], expected: list[str]) -> None:
    assert numbers(DIRECTORY.card_for(categories, topics)) == expected


@pytest.mark.parametrize(
    ("categories", "topics", "expected"),
    [
        pytest.param(
            ["danger", "detresse"],
            ["blessure", "suicide"],
            ["15", "112", "3114", "114"],
            id="injury then distress: 15 and 112 once",
        ),
        pytest.param(
            ["represailles", "danger"],
            ["menace", "violence"],
            ["17", "112", "3919", "114", "116 006"],
            id="danger before threats, whatever the input order",
        ),
        pytest.param(
            ["danger"],
            ["feu", "gaz"],
            ["18", "0 800 47 33 33", "112"],
            id="gas before fire, 18 once",
        ),
        pytest.param(
            ["danger"], ["arme", "blessure"], ["15", "112", "17"], id="injury before weapon"
        ),
        pytest.param(
            ["danger", "detresse", "represailles"],
            ["co", "automutilation", "menace"],
            ["18", "15", "112", "3114", "114", "17", "116 006"],
            id="three categories",
        ),
    ],
)
def test_cards_merge_in_category_priority(
    categories: list[str], topics: list[str], expected: list[str]
) -> None:
    assert numbers(DIRECTORY.card_for(categories, topics)) == expected


@pytest.mark.parametrize(
    ("categories", "topics", "region", "expected_local"),
    [
        pytest.param(
            ["represailles"],
            ["menace"],
            "69",
            ["mairie-lyon", "bailleur-lyon"],
            id="threats in the Rhône: topic match first",
        ),
        pytest.param(
            ["danger"],
            ["co"],
            "69",
            ["antipoison-lyon", "bailleur-lyon"],
            id="CO in the Rhône: antipoison first",
        ),
        pytest.param(
            ["danger"],
            ["structure"],
            "69",
            ["bailleur-lyon", "antipoison-lyon"],
            id="collapse in the Rhône: bailleur first",
        ),
        pytest.param(
            ["represailles"],
            ["menace"],
            "13",
            ["mairie-marseille"],
            id="threats in the Bouches-du-Rhône: not Lyon's",
        ),
        pytest.param(["detresse"], ["suicide"], "69", [], id="no local contact for distress"),
        pytest.param(["represailles"], ["menace"], "75", [], id="a region with no contacts"),
        pytest.param(["represailles"], ["menace"], None, [], id="no region: national only"),
        pytest.param(["rien"], [], "69", [], id="rien: no card, even locally"),
    ],
)
def test_local_contacts_follow_the_national_ones(
    categories: list[str], topics: list[str], region: str | None, expected_local: list[str]
) -> None:
    national = DIRECTORY.card_for(categories, topics)
    card = DIRECTORY.card_for(categories, topics, region)
    assert card[: len(national)] == national
    assert [c.id for c in card[len(national) :]] == expected_local


def test_112_is_on_every_card_that_is_not_empty() -> None:
    from directory.contact import CATEGORIES, TOPICS

    for category in CATEGORIES:
        for topics in [(), *((t,) for t in TOPICS), TOPICS]:
            assert "112" in numbers(DIRECTORY.card_for([category], topics, "69"))


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        pytest.param("SAMU", "samu", id="upper case"),
        pytest.param("samu", "samu", id="lower case"),
        pytest.param("Les Pompiers", "pompiers", id="alias with article, capitals"),
        pytest.param("sapeurs pompiers", "pompiers", id="name without hyphen"),
        pytest.param("SAPEURS-POMPIERS", "pompiers", id="name in capitals"),
        pytest.param("sos amitie", "sos-amitie", id="no accent"),
        pytest.param("SOS AMITIÉ", "sos-amitie", id="accented capital"),
        pytest.param("allo enfance en danger", "enfance-en-danger", id="Allô without accent"),
        pytest.param("grdf", "grdf", id="GRDF lower case"),
        pytest.param("Prévention du suicide", "prevention-suicide", id="alias with accent"),
        pytest.param("la gendarmerie", "police", id="gendarmerie"),
        pytest.param("116 006", "france-victimes", id="number as written"),
        pytest.param("116006", "france-victimes", id="number as dialled"),
        pytest.param("samu-social", "samu-social", id="id"),
        pytest.param("Samu Social", "samu-social", id="not the SAMU"),
        pytest.param("antipoison", "antipoison-lyon", id="a local alias, unique"),
        pytest.param("nobody", None, id="unknown"),
        pytest.param("mairie", None, id="local alias in two regions: ambiguous"),
    ],
)
def test_find(written: str, expected: str | None) -> None:
    found = DIRECTORY.find(written)
    assert (found.id if found else None) == expected


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        pytest.param("69", "mairie-lyon", id="Rhône"),
        pytest.param("13", "mairie-marseille", id="Bouches-du-Rhône"),
        pytest.param("75", None, id="Paris has none"),
    ],
)
def test_find_local_alias_in_a_region(region: str, expected: str | None) -> None:
    found = DIRECTORY.find("Mairie", region=region)
    assert (found.id if found else None) == expected


def test_snapshot_lookups() -> None:
    assert DIRECTORY.get("pompiers") is not None
    assert DIRECTORY.get("mairie-lyon") == LYON_MAIRIE
    assert DIRECTORY.get("nobody") is None
    assert len(DIRECTORY.contacts) == len(national_contacts()) + 4
    assert DIRECTORY.local_contacts == (
        LYON_MAIRIE,
        LYON_ANTIPOISON,
        LYON_BAILLEUR,
        MARSEILLE_MAIRIE,
    )


def test_a_local_contact_cannot_shadow_a_national_id() -> None:
    shadow = local(id="pompiers", name="Faux pompiers")
    directory = Directory(national_contacts(), [shadow])
    assert directory.get("pompiers") == national_contacts()[3]
    assert directory.local_contacts == ()


def test_national_contacts_must_cover_the_cards() -> None:
    with pytest.raises(ValueError, match="cards need"):
        Directory([c for c in national_contacts() if c.id != "grdf"])
