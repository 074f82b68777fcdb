"""Which national contacts a card shows, and in what order: pure tables, no contact data.

A card is built per fired category, in category priority (danger, detresse, represailles),
and the pieces are merged without duplicates. Within ``danger`` the topics contribute in the
order of ``DANGER_TOPICS`` (the most specific hazards first: the firefighters' topics, then
injury, violence, weapons); a category that fired with none of its topics (the detector's
``safety.timeout`` or ``safety.error`` verdicts) shows its default card. The European 112 is
on every card that is not empty.

Topic ``enfant`` turns the violence card's 3919 into the 119, and adds the 119 to the
threats card (a threat against a child).
"""

from __future__ import annotations

from collections.abc import Iterable

from directory.contact import CATEGORIES

__all__ = [
    "CARD_IDS",
    "DANGER_TOPICS",
    "EUROPEAN_EMERGENCY",
    "card_ids",
]

EUROPEAN_EMERGENCY = "urgence-europeenne"
SAMU = "samu"  # 15
POLICE = "police"  # 17, police or gendarmerie
POMPIERS = "pompiers"  # 18
SMS = "urgence-sms"  # by SMS, video or chat
SUICIDE = "prevention-suicide"  # suicide prevention
GAS = "grdf"  # Urgence sécurité gaz
VICTIMS = "france-victimes"  # 116 006
WOMEN = "violences-femmes"  # Violences Femmes Info
CHILDREN = "enfance-en-danger"  # Allô Enfance en danger

# Danger topics in card order, each with its card.
DANGER_TOPICS: dict[str, tuple[str, ...]] = {
    "gaz": (POMPIERS, GAS, EUROPEAN_EMERGENCY),
    "feu": (POMPIERS, EUROPEAN_EMERGENCY),
    "co": (POMPIERS, SAMU, EUROPEAN_EMERGENCY),
    "electricite": (POMPIERS, EUROPEAN_EMERGENCY),
    "structure": (POMPIERS, EUROPEAN_EMERGENCY),
    "blessure": (SAMU, EUROPEAN_EMERGENCY),
    "violence": (POLICE, EUROPEAN_EMERGENCY, WOMEN, SMS),
    "arme": (POLICE, EUROPEAN_EMERGENCY),
}
VIOLENCE_AGAINST_CHILD = (POLICE, EUROPEAN_EMERGENCY, CHILDREN, SMS)
DANGER_DEFAULT = (EUROPEAN_EMERGENCY, SAMU, POLICE, POMPIERS, SMS)
DISTRESS = (SUICIDE, SAMU, EUROPEAN_EMERGENCY, SMS)
THREATS = (POLICE, VICTIMS, EUROPEAN_EMERGENCY)
THREATS_AGAINST_CHILD = (*THREATS, CHILDREN)

# Every id a card may show (checked against the national data when a snapshot is built).
CARD_IDS = frozenset(
    {
        *(i for card in DANGER_TOPICS.values() for i in card),
        *VIOLENCE_AGAINST_CHILD,
        *DANGER_DEFAULT,
        *DISTRESS,
        *THREATS_AGAINST_CHILD,
    }
)


def _danger(topics: frozenset[str]) -> list[str]:
    ids: list[str] = []
    for topic, card in DANGER_TOPICS.items():
        if topic == "violence" and "enfant" in topics:  # with or without the violence topic
            ids.extend(VIOLENCE_AGAINST_CHILD)
        elif topic in topics:
            ids.extend(card)
    return ids or list(DANGER_DEFAULT)


def card_ids(categories: Iterable[str], topics: Iterable[str]) -> list[str]:
    """The ids of the national contacts of a card, most relevant first; empty for ``rien``.

    Unknown categories or topics are ignored: the card is computed at request time and must
    never fail.
    """
    fired = frozenset(categories)
    topic_set = frozenset(topics)
    ids: list[str] = []
    for category in CATEGORIES:
        if category not in fired:
            continue
        if category == "danger":
            ids.extend(_danger(topic_set))
        elif category == "detresse":
            ids.extend(DISTRESS)
        else:
            ids.extend(THREATS_AGAINST_CHILD if "enfant" in topic_set else THREATS)
    merged = list(dict.fromkeys(ids))
    if merged and EUROPEAN_EMERGENCY not in merged:
        merged.append(EUROPEAN_EMERGENCY)
    return merged
