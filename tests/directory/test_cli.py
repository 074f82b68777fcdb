"""``nuisances directory``: through Typer's runner, against a temporary SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from directory.io import parse_contacts
from directory.national import national_contacts
from server.cli import app
from tests.directory.helpers import LOCAL_FILE

runner = CliRunner()
LOCAL_IDS = [c.id for c in parse_contacts(LOCAL_FILE, "local.yaml")]


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data" / "nuisances.db"  # the directory does not exist yet
    monkeypatch.setenv("NUISANCES_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("COLUMNS", "200")
    return path


@pytest.fixture
def local_file(tmp_path: Path) -> Path:
    path = tmp_path / "local.yaml"
    path.write_text(LOCAL_FILE, encoding="utf-8")
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["directory", *args])
    return result.exit_code, result.output


def test_import_prints_what_changed_and_is_idempotent(database: Path, local_file: Path) -> None:
    code, output = invoke("import", str(local_file))
    assert code == 0, output
    assert database.exists()
    assert f"added (3): {', '.join(LOCAL_IDS)}" in output
    code, output = invoke("import", str(local_file))
    assert code == 0
    assert "added (0): -" in output
    assert f"unchanged (3): {', '.join(LOCAL_IDS)}" in output


def test_import_reports_an_update(database: Path, local_file: Path) -> None:
    invoke("import", str(local_file))
    local_file.write_text(LOCAL_FILE.replace("24 h/24, 7 j/7", "jour et nuit"), encoding="utf-8")
    code, output = invoke("import", str(local_file))
    assert code == 0
    assert "updated (2): antipoison-lyon, police-municipale-ajaccio" in output
    assert "unchanged (1): mairie-lyon" in output


@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        pytest.param("04 72 11 69 11", "04 72 11 69", 13, "not a valid French phone", id="number"),
        pytest.param("region: 2A", "region: 2C", 24, "bad département", id="département"),
        pytest.param("id: antipoison-lyon", "id: mairie-lyon", 11, "duplicate id", id="dup"),
        pytest.param("  topics: [co]\n", "  topic: [co]\n", 19, "unknown field", id="field"),
    ],
)
def test_an_invalid_file_is_refused_whole(
    database: Path, local_file: Path, old: str, new: str, line: int, reason: str
) -> None:
    local_file.write_text(LOCAL_FILE.replace(old, new, 1), encoding="utf-8")
    code, output = invoke("import", str(local_file))
    assert code == 2
    assert f"local.yaml:{line}:" in output
    assert reason in output
    code, output = invoke("export")
    assert code == 0
    assert output == "[]\n"  # nothing was written, not even the valid contacts before it


def test_a_missing_file_is_a_usage_error(database: Path, tmp_path: Path) -> None:
    code, output = invoke("import", str(tmp_path / "absent.yaml"))
    assert code == 2
    assert "cannot read" in output


def test_export_reimports_identically(database: Path, local_file: Path, tmp_path: Path) -> None:
    invoke("import", str(local_file))
    code, exported = invoke("export")
    assert code == 0
    assert sorted(c.id for c in parse_contacts(exported, "export")) == sorted(LOCAL_IDS)
    again = tmp_path / "again.yaml"
    again.write_text(exported, encoding="utf-8")
    code, output = invoke("import", str(again))
    assert code == 0
    assert "unchanged (3)" in output


def test_export_all_includes_the_national_contacts(database: Path, local_file: Path) -> None:
    invoke("import", str(local_file))
    code, exported = invoke("export", "--all")
    assert code == 0
    contacts = parse_contacts(exported, "export", scope="any")
    assert tuple(contacts[: len(national_contacts())]) == national_contacts()
    assert len(contacts) == len(national_contacts()) + 3


def test_list_shows_national_and_local_contacts(database: Path, local_file: Path) -> None:
    invoke("import", str(local_file))
    code, output = invoke("list")
    assert code == 0
    for expected in ("police", "0 800 47 33 33", "mairie-lyon", "2A"):
        assert expected in output
    code, output = invoke("list", "--region", "2A")
    assert "police-municipale-ajaccio" in output
    assert "mairie-lyon" not in output
    assert "pompiers" in output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["danger", "--topic", "gaz"], ["18", "0 800 47 33 33", "112"], id="gas"),
        pytest.param(
            ["danger", "--topic", "violence", "--topic", "enfant"],
            ["17", "112", "119", "114"],
            id="violence against a child",
        ),
        pytest.param(
            ["represailles", "--topic", "menace", "--region", "69"],
            ["17", "116 006", "112", "04 72 10 30 30"],
            id="threats, with the Rhône's mairie",
        ),
        pytest.param(["detresse"], ["3114", "15", "112", "114"], id="distress"),
    ],
)
def test_card_in_order(
    database: Path, local_file: Path, args: list[str], expected: list[str]
) -> None:
    invoke("import", str(local_file))
    code, output = invoke("card", *args)
    assert code == 0, output
    rows = [line for line in output.splitlines() if line.startswith("│")]
    assert [row.split("│")[3].strip() for row in rows] == expected


def test_card_rien_is_empty(database: Path) -> None:
    code, output = invoke("card", "rien")
    assert code == 0
    assert "no card" in output


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["card", "urgent"], id="unknown category"),
        pytest.param(["card", "danger", "--topic", "bruit"], id="unknown topic"),
        pytest.param(["card", "danger", "--region", "20"], id="bad département"),
        pytest.param(["list", "--region", "Rhône"], id="a name is no département"),
    ],
)
def test_unknown_words_are_usage_errors(database: Path, args: list[str]) -> None:
    code, _ = invoke(*args)
    assert code == 2


def test_a_malformed_url_still_shows_the_card(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUISANCES_DATABASE_URL", "not a url")
    monkeypatch.setenv("COLUMNS", "200")
    code, output = invoke("card", "detresse")
    assert code == 0
    assert "Numéro national de prévention du suicide" in output
    code, output = invoke("export")
    assert code == 1
    assert "bad NUISANCES_DATABASE_URL" in output


def test_card_without_a_database_shows_the_national_card(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NUISANCES_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:1/x")
    monkeypatch.setenv("COLUMNS", "200")
    code, output = invoke("card", "danger", "--topic", "feu")
    assert code == 0
    assert "national contacts only" in output
    assert "Sapeurs-pompiers" in output
