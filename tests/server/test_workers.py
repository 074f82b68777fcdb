"""Two API worker processes on PostgreSQL keep every promise of one.

The real ``nuisances serve --workers 2`` runs against a real PostgreSQL database and the fake
Ollama (a real HTTP server), one generation at a time. Each request goes on a connection of
its own, so the kernel hands them to both workers; the workers' log lines (their process id)
show that both served.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from tests.database import postgres_database
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

ROOT = Path(__file__).resolve().parents[2]
NOISE = "le voisin fait du bruit tous les soirs, que faire ?"
QUOTA = 4  # per device and per day


@dataclass
class Workers:
    url: str
    database_url: str
    fake: FakeOllama
    log: Path

    def token(self, label: str) -> str:
        engine = make_engine(self.database_url)
        try:
            with make_session_factory(engine)() as session:
                return repository.create_device(session, label)[1]
        finally:
            engine.dispose()

    def chat(self, token: str, body: dict[str, Any]) -> httpx.Response:
        """One turn on a connection of its own (``Connection: close``)."""
        with httpx.Client(base_url=self.url, timeout=60) as http:
            return http.post(
                "/v1/chat",
                json=body,
                headers={"Authorization": f"Bearer {token}", "Connection": "close"},
            )

    def generations(self) -> int:
        return sum(1 for r in self.fake.requests if r.get("messages"))

    def pids(self, event: str) -> set[int]:
        found = set()
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("event") == event:
                    found.add(entry["pid"])
        return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    behaviour = Behaviour.normal(
        "Notez chaque épisode dans le journal, avec la date et l'heure.", chunk_size=4, delay=0.03
    )
    with (
        postgres_database() as database_url,
        FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=behaviour) as fake,
    ):
        upgrade(database_url)
        port = _free_port()
        data = Path(tempfile.mkdtemp(prefix="nuisances-workers-"))
        env = {
            **os.environ,
            "NUISANCES_DATABASE_URL": database_url,
            "NUISANCES_PROVIDER__BASE_URL": fake.url,
            "NUISANCES_PROVIDER__MODEL": DEFAULT_MODEL,
            "NUISANCES_PROVIDER__PARALLEL": "1",
            "NUISANCES_ADMISSION__MAX_WAITING": "16",
            "NUISANCES_ADMISSION__WAIT_S": "60",
            "NUISANCES_ADMISSION__DEVICE_WAITING": "2",
            "NUISANCES_ADMISSION__QUOTA_PER_DEVICE": str(QUOTA),
            "NUISANCES_WARM_UP": "false",
            "NUISANCES_HEALTH_INTERVAL_S": "3600",
            "NUISANCES_CACHE_TTL_S": "0",
            "NUISANCES_CREATE_FIRST_TOKEN": "false",
            "NUISANCES_DATA_DIR": str(data),
            "NUISANCES_SECRET": uuid.uuid4().hex + uuid.uuid4().hex,
        }
        log = data / "server.log"
        with log.open("wb") as stderr:
            server = subprocess.Popen(  # noqa: S603 - the project's own entry point
                [
                    str(Path(sys.executable).parent / "nuisances"),
                    "serve",
                    "--workers",
                    "2",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 60
                while True:
                    assert server.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, "the workers did not start"
                    try:
                        if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.2)
                yield Workers(url, database_url, fake, log)
            finally:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()


def _body(conversation: str | None = None, message_id: str | None = None) -> dict[str, str]:
    return {
        "conversation_id": conversation or uuid.uuid4().hex[:12],
        "client_message_id": message_id or uuid.uuid4().hex,
        "message": NOISE,
    }


def _turns_total(workers: Workers) -> float:
    with httpx.Client(base_url=workers.url, timeout=10) as http:
        text = http.get("/metrics", headers={"Connection": "close"}).text
    return sum(
        float(match.group(1))
        for match in re.finditer(r"^nuisances_turns_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    )


def test_one_generation_at_a_time_for_one_slot_whichever_worker(workers: Workers) -> None:
    tokens = [workers.token(f"phone-{n}") for n in range(8)]
    before = _turns_total(workers)
    sent = 0
    # Which worker accepts a connection is the kernel's choice: batches of 8 at once until
    # both have answered turns (one worker may take a whole batch).
    for _ in range(10):
        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(lambda t: workers.chat(t, _body()), tokens))
        sent += len(responses)
        assert [r.status_code for r in responses] == [200] * 8
        assert {(r.json()["source"], r.json()["status"]) for r in responses} == {("llm", "ok")}
        if len(workers.pids("turn answered")) == 2:
            break
    assert len(workers.pids("turn answered")) == 2  # both workers answered turns
    assert workers.fake.max_concurrent == 1
    # /metrics adds both workers up, whichever of them answers the scrape.
    assert {_turns_total(workers) - before for _ in range(6)} == {sent}


def test_the_daily_quota_is_counted_once_across_workers(workers: Workers) -> None:
    token = workers.token("quota phone")
    generations = workers.generations()
    with ThreadPoolExecutor(2) as pool:  # two at a time: the device's limit of turns in flight
        responses = list(pool.map(lambda _: workers.chat(token, _body()), range(2 * QUOTA)))
    statuses = sorted(r.json()["status"] for r in responses)
    assert statuses == ["ok"] * QUOTA + ["quota"] * QUOTA
    assert workers.generations() - generations == QUOTA


def test_a_retry_on_another_worker_waits_for_the_first_try(workers: Workers) -> None:
    pairs = [(workers.token(f"retry-{n}"), _body()) for n in range(6)]
    generations = workers.generations()
    with ThreadPoolExecutor(12) as pool:
        futures = [
            (pool.submit(workers.chat, t, b), pool.submit(workers.chat, t, b)) for t, b in pairs
        ]
        answers = [(a.result().json(), b.result().json()) for a, b in futures]
    for first, second in answers:
        assert first["text"] == second["text"]
        assert first["turn_id"] == second["turn_id"]
        assert sorted([first.get("replayed", False), second.get("replayed", False)]) == [
            False,
            True,
        ]
    assert workers.generations() - generations == len(pairs)


def test_a_third_turn_of_one_device_is_refused_with_its_card(workers: Workers) -> None:
    token = workers.token("greedy phone")
    danger = "ça sent le gaz dans l'escalier"
    bodies = [{**_body(), "message": danger} for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:
        responses = list(pool.map(lambda b: workers.chat(token, b), bodies))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 429]
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["Retry-After"] == "5"
    error = refused.json()["error"]
    assert error["code"] == "too_many_turns"
    assert error["retry_after_s"] == 5
    assert error["safety"]["category"] != "rien"
    assert error["safety"]["card"]
