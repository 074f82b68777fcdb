"""Contacts files: validated whole, every problem named by line; exports read back equal."""

from __future__ import annotations

from pathlib import Path

import pytest

from directory.io import ContactFileError, dump_contacts, parse_contacts, read_contacts_file
from directory.national import national_contacts, national_ids
from tests.directory.helpers import LOCAL_FILE


def test_a_local_file_reads_as_written() -> None:
    contacts = parse_contacts(LOCAL_FILE, "local.yaml", reserved_ids=national_ids())
    assert [c.id for c in contacts] == [
        "mairie-lyon",
        "antipoison-lyon",
        "police-municipale-ajaccio",
    ]
    assert contacts[0].region == "69"  # plain 69, kept as written
    assert contacts[0].number == "04 72 10 30 30"
    assert contacts[2].region == "2A"


def _replace(old: str, new: str) -> str:
    assert old in LOCAL_FILE
    return LOCAL_FILE.replace(old, new, 1)


# Line numbers refer to LOCAL_FILE: the second contact starts at line 11, the third at 20.
@pytest.mark.parametrize(
    ("text", "line", "contact_id", "reason"),
    [
        pytest.param(
            _replace("  topics: [co]\n", "  topics: [co]\n  colour: red\n"),
            20,
            "antipoison-lyon",
            "unknown field 'colour'",
            id="unknown field",
        ),
        pytest.param(
            _replace("04 72 11 69 11", "04-72-11-69-11"),
            13,
            "antipoison-lyon",
            "malformed number",
            id="malformed number",
        ),
        pytest.param(
            _replace("04 72 11 69 11", "00 44 20 7946 0958"),
            13,
            "antipoison-lyon",
            "not a valid French phone number",
            id="a London number",
        ),
        pytest.param(
            _replace("04 72 11 69 11", "1234"),
            13,
            "antipoison-lyon",
            "not a valid French short number",
            id="short not valid",
        ),
        pytest.param(
            _replace("region: 2A", "region: 20"),
            24,
            "police-municipale-ajaccio",
            "bad département",
            id="bad département",
        ),
        pytest.param(
            _replace("id: antipoison-lyon", "id: Antipoison"),
            11,
            "Antipoison",
            "bad id",
            id="bad slug",
        ),
        pytest.param(
            _replace("id: antipoison-lyon", "id: mairie-lyon"),
            11,
            "mairie-lyon",
            "duplicate id (first at line 1)",
            id="duplicate id",
        ),
        pytest.param(
            _replace("id: antipoison-lyon", "id: pompiers"),
            11,
            "pompiers",
            "belongs to a national contact",
            id="national id taken",
        ),
        pytest.param(
            _replace("  region: 2A\n", ""),
            20,
            "police-municipale-ajaccio",
            "needs a region",
            id="local without region",
        ),
        pytest.param(
            _replace("  region: 69\n", "  region: null\n"),
            5,
            "mairie-lyon",
            "needs a region",
            id="null region",
        ),
        pytest.param(
            _replace("  hours: 24 h/24, 7 j/7\n", ""),
            11,
            "antipoison-lyon",
            "missing field 'hours'",
            id="missing field",
        ),
        pytest.param(
            _replace("topics: [violence, menace]", "topics: [violence, bruit]"),
            28,
            "police-municipale-ajaccio",
            "topics.1",
            id="unknown topic, item line",
        ),
        pytest.param(
            _replace("  kind: local\n", "  kind: local\n  kind: service\n"),
            5,
            "mairie-lyon",
            "given twice",
            id="field given twice",
        ),
        pytest.param(
            _replace("  categories: [danger]\n", "  categories: [danger\n"),
            None,
            None,
            "not valid YAML",
            id="broken YAML",
        ),
        pytest.param("id: seul\n", 1, None, "expected a list of contacts", id="not a list"),
        pytest.param("- mairie\n", 1, None, "expected a contact", id="item not a mapping"),
    ],
)
def test_a_bad_file_names_line_id_and_reason(
    text: str, line: int | None, contact_id: str | None, reason: str
) -> None:
    with pytest.raises(ContactFileError) as caught:
        parse_contacts(text, "local.yaml", reserved_ids=national_ids())
    error = caught.value
    assert reason in error.reason
    assert error.contact_id == contact_id
    if line is not None:
        assert error.line == line
        assert str(error).startswith(f"local.yaml:{line}:")
    else:
        assert error.line is not None  # YAML errors carry their mark too


def test_reading_a_missing_file_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(ContactFileError, match="cannot read"):
        read_contacts_file(tmp_path / "absent.yaml")


def test_an_empty_file_holds_no_contacts() -> None:
    assert parse_contacts("", "empty.yaml") == []
    assert parse_contacts("[]\n", "empty.yaml") == []


def test_local_export_reads_back_identically(tmp_path: Path) -> None:
    contacts = parse_contacts(LOCAL_FILE, "local.yaml")
    path = tmp_path / "export.yaml"
    path.write_text(dump_contacts(contacts), encoding="utf-8")
    assert read_contacts_file(path, reserved_ids=national_ids()) == contacts


def test_national_export_reads_back_identically() -> None:
    text = dump_contacts(national_contacts())
    assert tuple(parse_contacts(text, "all.yaml", scope="national")) == national_contacts()
    assert parse_contacts(text, "all.yaml", scope="any") == list(national_contacts())


def test_export_of_nothing_is_an_empty_list() -> None:
    assert parse_contacts(dump_contacts([]), "none.yaml") == []
