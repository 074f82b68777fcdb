"""The national contacts shipped with the package (``directory/data/national.yaml``).

Loaded and validated on first use, then cached for the life of the process. A broken file is
a packaging error: it raises ``ContactFileError`` naming the entry (line and id), and the
server should call ``national_contacts()`` at start-up so that it fails there, not later.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from directory.contact import Contact
from directory.io import parse_contacts

__all__ = ["NATIONAL_FILE", "national_contacts", "national_ids"]

NATIONAL_FILE = "national.yaml"


@cache
def national_contacts() -> tuple[Contact, ...]:
    """Every national contact, in file order; validated once per process."""
    resource = resources.files("directory") / "data" / NATIONAL_FILE
    text = resource.read_text(encoding="utf-8")
    return tuple(parse_contacts(text, f"directory/data/{NATIONAL_FILE}", scope="national"))


def national_ids() -> frozenset[str]:
    """The ids no local contact may take."""
    return frozenset(contact.id for contact in national_contacts())
