"""Directory of contacts and their numbers: the card for a detection (see README).

- ``Contact``: one number, validated with ``phonenumbers``.
- ``national_contacts()``: the contacts shipped in ``directory/data/national.yaml``.
- ``Directory``: an immutable snapshot with ``get``, ``find`` and ``card_for``.
- ``DirectoryStore``: the current snapshot, reloaded from the ``local_contacts`` table.
"""

from directory.contact import Contact
from directory.io import ContactFileError, dump_contacts, parse_contacts, read_contacts_file
from directory.models import (
    DirectoryBase,
    ImportReport,
    fingerprint,
    load_local_contacts,
    upsert_contacts,
)
from directory.national import national_contacts
from directory.snapshot import Directory, DirectoryStore

__all__ = [
    "Contact",
    "ContactFileError",
    "Directory",
    "DirectoryBase",
    "DirectoryStore",
    "ImportReport",
    "dump_contacts",
    "fingerprint",
    "load_local_contacts",
    "national_contacts",
    "parse_contacts",
    "read_contacts_file",
    "upsert_contacts",
]
