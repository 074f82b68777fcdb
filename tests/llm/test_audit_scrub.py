"""The audit log's own scan: what pseudonymisation leaves is still kept out of the file."""

from __future__ import annotations

import pytest

from llm.audit_scrub import scrub

# (text, what must be gone from it)
LEAKS = [
    ("Sandrine Lebreton fait du bruit", ["Sandrine", "Lebreton"]),
    ("Je vis chez les Nguyen depuis un an", ["Nguyen"]),
    ("Mme de La Tourette tape au plafond", ["Tourette", "La Tourette"]),
    ("au bâtiment B appartement 34, au fond", ["bâtiment B", "appartement 34"]),
    ("écrire à marie arobase example point fr", ["marie", "example point fr"]),
    ("voici mon jeton nui_Zk3vQ9pL2xYw8RtBn5Mc7Hs4 au cas où", ["nui_Zk3vQ9pL2xYw8RtBn5Mc7Hs4"]),
    ("il habite rue de la Paix depuis", ["rue de la Paix", "Paix"]),
    ("au 12 bis rue Victor Hugo, 75011 Paris", ["Victor", "Hugo", "75011", "Paris"]),
    ("m'appeler au 06 12 34 56 78 le soir", ["06 12 34 56 78"]),
    ("contact : jean.dupont@example.org", ["jean.dupont@example.org"]),
    ("Karim met la musique à fond.", ["Karim"]),
    ("le 3e étage porte 12 fait la fête", ["porte 12", "3e étage"]),
    ("la voiture AB-123-CD bloque la sortie", ["AB-123-CD"]),
]

# Text with nothing to remove: kept as is.
CLEAN = [
    "Depuis trois semaines le chien aboie la nuit.",
    "Bonjour, que puis-je faire contre le bruit ? Appelez le SAMU ou le 15.",
    "PERS-1 habite [adresse-1] et écrit depuis [courriel-1].",
    "La porte d'entrée claque sans arrêt.",
]


@pytest.mark.parametrize(("text", "gone"), LEAKS, ids=[t for t, _ in LEAKS])
def test_identifiers_left_by_pseudonymisation_are_masked(text: str, gone: list[str]) -> None:
    clean, kinds = scrub(text)
    for value in gone:
        assert value not in clean
    assert kinds
    assert "[masqué:" in clean


@pytest.mark.parametrize("text", CLEAN)
def test_text_without_identifiers_is_left_alone(text: str) -> None:
    assert scrub(text) == (text, {})
