"""Contacts and files shared by the directory tests."""

from __future__ import annotations

from typing import Any

from directory.contact import Contact


def contact_fields(**overrides: Any) -> dict[str, Any]:
    """The fields of a valid local contact (a mairie in the Rhône), with overrides."""
    fields: dict[str, Any] = {
        "id": "mairie-lyon",
        "name": "Mairie de Lyon",
        "number": "04 72 10 30 30",
        "kind": "local",
        "region": "69",
        "description": "Accueil de la mairie, pour les arrêtés sur le bruit et la tranquillité.",
        "hours": "du lundi au vendredi, de 8 h 45 à 16 h 45",
        "categories": ["represailles"],
        "topics": ["menace"],
        "aliases": ["mairie", "Hôtel de ville de Lyon"],
    }
    fields.update(overrides)
    return fields


def local(**overrides: Any) -> Contact:
    return Contact.model_validate(contact_fields(**overrides))


LOCAL_FILE = """\
- id: mairie-lyon
  name: Mairie de Lyon
  number: 04 72 10 30 30
  kind: local
  region: 69
  description: Accueil de la mairie, pour les arrêtés sur le bruit et la tranquillité.
  hours: du lundi au vendredi, de 8 h 45 à 16 h 45
  categories: [represailles]
  topics: [menace]
  aliases: [mairie, Hôtel de ville de Lyon]
- id: antipoison-lyon
  name: Centre antipoison de Lyon
  number: 04 72 11 69 11
  kind: local
  region: 69
  description: Conseil médical en cas d'intoxication, dont le monoxyde de carbone.
  hours: 24 h/24, 7 j/7
  categories: [danger]
  topics: [co]
- id: police-municipale-ajaccio
  name: Police municipale d'Ajaccio
  number: 04 95 51 52 53
  kind: local
  region: 2A
  description: Pour le tapage et les troubles à la tranquillité publique.
  hours: 24 h/24, 7 j/7
  categories: [danger, represailles]
  topics: [violence, menace]
"""
