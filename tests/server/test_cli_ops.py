"""The operator's commands through Typer's runner: tokens, db purge, doctor."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from server.cli import app
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama, unused_port_url

RUNNER = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NUISANCES_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite'}")
    monkeypatch.setenv("NUISANCES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NUISANCES_BUDGETS__FIRST_TOKEN_S", "2")
    monkeypatch.setenv("NUISANCES_BUDGETS__RETRIES", "0")
    return tmp_path


def test_tokens_create_list_revoke(env: Path) -> None:
    created = RUNNER.invoke(app, ["tokens", "create", "--label", "téléphone de Léa"])
    assert created.exit_code == 0, created.output
    token = created.output.strip().splitlines()[-1]
    assert token.startswith("nui_")
    listed = RUNNER.invoke(app, ["tokens", "list"])
    assert "téléphone de Léa" in listed.output
    assert token not in listed.output  # shown once, never again
    device = created.output.split()[1]
    assert RUNNER.invoke(app, ["tokens", "revoke", device]).exit_code == 0
    assert RUNNER.invoke(app, ["tokens", "revoke", "nobody"]).exit_code == 1


def test_db_purge_reports_what_it_deleted(env: Path) -> None:
    result = RUNNER.invoke(app, ["db", "purge", "--older-than", "30d"])
    assert result.exit_code == 0, result.output
    assert "deleted 0 turns, 0 conversations and 0 audit lines older than 30d" in result.output
    assert RUNNER.invoke(app, ["db", "purge", "--older-than", "soon"]).exit_code != 0


def test_doctor_llm_ok(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as fake:
        fake.enqueue(Behaviour.normal("Parlez-en d'abord avec votre voisin, puis notez tout."))
        monkeypatch.setenv("NUISANCES_PROVIDER__BASE_URL", fake.url)
        monkeypatch.setenv("NUISANCES_PROVIDER__MODEL", DEFAULT_MODEL)
        result = RUNNER.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "verdict: LLM_OK" in result.output
    assert "probe answer" in result.output


def test_doctor_names_the_reason_when_the_model_is_down(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUISANCES_PROVIDER__BASE_URL", unused_port_url())
    result = RUNNER.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "verdict: FALLBACK_PROVIDER (ConnectionRefused)" in result.output


def test_doctor_reports_a_policy_refusal(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUISANCES_PROVIDER__BASE_URL", "http://10.255.255.1:11434")
    monkeypatch.setenv("NUISANCES_BUDGETS__CONNECT_S", "0.2")
    result = RUNNER.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "neither loopback nor trusted" in result.output
    assert "verdict: FALLBACK_POLICY" in result.output
