"""``nuisances bench run``: the real app in-process (or a running server) with the fake Ollama."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.records import RunDir
from server.cli import app
from server.main import create_app
from server.settings import Settings
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama
from tests.live_server import serving
from tests.server.conftest import make_settings, new_token

RUNNER = CliRunner()
ONLY = ["--only", "gaz-cage-escalier", "--only", "tapage-nocturne-police",
        "--only", "conversation-bruit-puis-gaz"]  # fmt: skip


@pytest.fixture
def assistant() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as fake:
        yield fake


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, assistant: FakeOllama) -> str:
    """Settings come from the environment, as on the operator's box."""
    monkeypatch.delenv("NUISANCES_CONFIG", raising=False)
    database = f"sqlite:///{tmp_path / 'bench.db'}"
    for name, value in {
        "DATABASE_URL": database, "PROVIDER__BASE_URL": assistant.url,
        "PROVIDER__MODEL": DEFAULT_MODEL, "WARM_UP": "false", "HEALTH_INTERVAL_S": "3600",
        "BUDGETS__FIRST_TOKEN_S": "2", "BUDGETS__IDLE_S": "1", "BUDGETS__TOTAL_S": "5",
        "BUDGETS__RETRIES": "0", "ADMISSION__QUOTA_PER_DEVICE": "1",
    }.items():  # fmt: skip
        monkeypatch.setenv(f"NUISANCES_{name}", value)
    return database


def chat_requests(fake: FakeOllama) -> list[dict[str, object]]:
    return [body for body in fake.requests if body.get("messages")]


def test_run_in_process_records_every_answer(
    tmp_path: Path, environment: str, assistant: FakeOllama
) -> None:
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["bench", "run", *ONLY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    run = RunDir(out)
    manifest = run.manifest()
    assert (manifest.target.mode, manifest.target.model) == ("in_process", DEFAULT_MODEL)
    assert manifest.target.digest  # the fake Ollama's /api/tags gives one
    assert {"grdf", "pompiers"} <= {entry.id for entry in manifest.directory}
    answers = {a.scenario_id: a for a in run.answers()}
    assert set(answers) == {
        "gaz-cage-escalier",
        "tapage-nocturne-police",
        "conversation-bruit-puis-gaz",
    }
    gas = answers["gaz-cage-escalier"].final
    assert gas.events[0] == "safety"
    assert gas.events[-1] == "done"
    assert gas.safety is not None
    assert gas.safety.category == "danger"
    assert gas.response is not None
    assert gas.response.source == "llm"  # quotas are lifted for the bench (quota 1 in the env)
    conversation = answers["conversation-bruit-puis-gaz"]
    assert len(conversation.turns) == 2
    assert conversation.turns[0].response is not None
    second = conversation.turns[1].message
    [sent] = [r["messages"] for r in chat_requests(assistant) if second in str(r["messages"])]
    assert isinstance(sent, list)
    assert any(m["content"] == conversation.turns[0].response.text for m in sent)  # history


def test_a_run_resumes_and_refuses_another_scenario_set(
    tmp_path: Path, environment: str, assistant: FakeOllama
) -> None:
    out = tmp_path / "run"
    assert RUNNER.invoke(app, ["bench", "run", *ONLY, "--out", str(out)]).exit_code == 0
    played = len(chat_requests(assistant))
    again = RUNNER.invoke(app, ["bench", "run", *ONLY, "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert len(chat_requests(assistant)) == played  # everything was recorded: nothing replayed
    other = RUNNER.invoke(app, ["bench", "run", "--only", "perceuse-dimanche", "--out", str(out)])
    assert other.exit_code == 2
    assert "holds another run" in other.output


def test_a_fallback_is_recorded_as_the_person_sees_it(
    tmp_path: Path, environment: str, assistant: FakeOllama
) -> None:
    assistant.enqueue(Behaviour.server_error())
    out = tmp_path / "run"
    result = RUNNER.invoke(app, ["bench", "run", "--only", "gaz-cage-escalier", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [answer] = RunDir(out).answers()
    response = answer.final.response
    assert response is not None
    assert (response.source, response.status) == ("fallback", "unavailable")
    assert "grdf" in [c["id"] for c in response.contacts]


@pytest.fixture
def live_url(tmp_path: Path, assistant: FakeOllama) -> Iterator[tuple[str, Settings]]:
    settings = make_settings(f"sqlite:///{tmp_path / 'live.db'}", assistant.url)
    with serving(create_app(settings)) as url:
        yield url, settings


def test_run_against_a_running_server(tmp_path: Path, live_url: tuple[str, Settings]) -> None:
    url, settings = live_url
    token = new_token(settings.database_url)
    out = tmp_path / "run"
    result = RUNNER.invoke(
        app,
        [
            "bench",
            "run",
            "--only",
            "tapage-nocturne-police",
            "--url",
            url,
            "--token",
            token,
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = RunDir(out).manifest()
    assert (manifest.target.mode, manifest.target.url) == ("url", url)
    assert (manifest.target.provider_type, manifest.target.model) == ("ollama", DEFAULT_MODEL)
    [answer] = RunDir(out).answers()
    assert answer.final.response is not None
