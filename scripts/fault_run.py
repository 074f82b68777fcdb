"""Fault run: PostgreSQL stopped for 10 s while 100 clients send 10 messages each.

A real uvicorn server (child process) with the fake Ollama (a real HTTP server) in front of a
fresh database on the local PostgreSQL. 100 clients, each with its own device and
conversation, send 10 messages one after the other as Server-Sent Events (every fifth one a
gas leak); two seconds in, PostgreSQL is stopped (``pg_ctlcluster … stop -m fast``: every
connection cut) and started again 10 s later. A request that fails at the transport level is
retried with the same ``client_message_id``, as the app does.

Then it waits for the spool to drain, and checks, printing each figure:

- every request got the ``safety`` event first, with the category its message calls for;
- every request ended with ``done`` (none with ``error``, none cut);
- stored = sent: one turn per (device, conversation, client_message_id), every one ``done``,
  none ``running``, each stored reply equal to the answer the client got;
- a retry of every message after the run replays the stored answer, within the turn budget;
- no retry (a client's after a cut connection, or after the run) took longer than the turn
  budget. The slowest first try is printed too: under 100 clients on two cores the event loop
  itself queues, which is the load issue of the scale-out work, not an outage's.

Needs PostgreSQL on 127.0.0.1:5432 (trust auth) and the right to stop and start it
(``pg_ctlcluster``). Exits 1 when a check fails.

    .venv/bin/python scripts/fault_run.py [--clients 100] [--messages 10] [--outage-s 10]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm.config import Budgets, ProviderConfig
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import AdmissionSettings, Settings
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama
from tests.live_server import serving
from tests.server.conftest import sse_events

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
GAS = "ça sent le gaz très fort dans l'escalier, message {n}"
NOISE = "le voisin fait du bruit tous les soirs, que faire ? message {n}"
BUDGETS = Budgets(connect_s=1, first_token_s=5, idle_s=3, total_s=10, retries=0)
WAIT_S = 2.0
TURN_BUDGET_S = BUDGETS.total_s + WAIT_S  # what a person may wait for one answer


def _settings(database_url: str, model_url: str, data_dir: Path) -> Settings:
    return Settings(
        database_url=database_url,
        provider=ProviderConfig(base_url=model_url, model=DEFAULT_MODEL, parallel=4),  # type: ignore[arg-type]
        budgets=BUDGETS,
        admission=AdmissionSettings(
            max_waiting=8, wait_s=WAIT_S, quota_per_device=None, quota_global=None
        ),
        warm_up=False,
        health_interval_s=3600,
        data_dir=data_dir,
        log_level="WARNING",
        spool_replay_s=1.0,
    )


def _child(database_url: str, data_dir: Path, ready_file: Path) -> None:
    """The server side: fake model + API on a free port, until terminated."""
    behaviour = Behaviour.normal("Notez chaque épisode dans le journal, avec l'heure. " * 2)
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=behaviour) as fake:
        app = create_app(_settings(database_url, fake.url, data_dir), freeze_gc=True)
        with serving(app, log_level="warning", backlog=2048) as url:
            ready_file.write_text(url)
            while True:  # until the parent terminates this process
                time.sleep(3600)


@dataclass
class Outcome:
    kinds: list[str] = field(default_factory=list)
    first_event_s: float | None = None
    total_s: float = 0.0
    attempts: int = 0
    done: dict[str, Any] | None = None
    category: str | None = None
    conflict: bool = False


async def _send(
    http: httpx.AsyncClient, token: str, body: dict[str, Any], outcome: Outcome
) -> None:
    """One chat request as a stream; retried with the same id when the transport fails."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    started = time.perf_counter()
    for _attempt in range(5):
        outcome.attempts += 1
        kinds: list[str] = []
        try:
            async with http.stream("POST", "/v1/chat", json=body, headers=headers) as response:
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        parsed = sse_events(block)
                        if not parsed or parsed[0][0] == "heartbeat":
                            continue
                        kind, data = parsed[0]
                        if not kinds:
                            outcome.first_event_s = time.perf_counter() - started
                        kinds.append(kind)
                        if kind == "safety" and data is not None:
                            outcome.category = data["category"]
                        elif kind == "done":
                            outcome.done = data
                        elif kind == "error":
                            outcome.conflict = True
            if kinds and kinds[-1] in ("done", "error"):
                outcome.kinds = kinds
                break
        except httpx.HTTPError:
            await asyncio.sleep(0.5)
    outcome.total_s = time.perf_counter() - started


def _postgres(action: str) -> None:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action]
    if action == "stop":
        command += ["-m", "fast"]
    subprocess.run(command, check=True)  # noqa: S603 - fixed arguments


async def _load(
    url: str, tokens: list[str], messages: int, outage_s: float
) -> dict[tuple[int, int], Outcome]:
    outcomes: dict[tuple[int, int], Outcome] = {}
    limits = httpx.Limits(max_connections=len(tokens) + 8)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def client(index: int) -> None:
            await asyncio.sleep(random.random())  # noqa: S311 - spread the start
            for n in range(messages):
                text = (GAS if n % 5 == 0 else NOISE).format(n=n)
                body = {"conversation_id": f"c-{index}", "client_message_id": f"m-{n}",
                        "message": text}  # fmt: skip
                outcome = outcomes[(index, n)] = Outcome()
                await _send(http, tokens[index], body, outcome)

        async def outage() -> None:
            await asyncio.sleep(2.0)
            print(f"  stopping PostgreSQL for {outage_s:g} s")
            await asyncio.to_thread(_postgres, "stop")
            await asyncio.sleep(outage_s)
            await asyncio.to_thread(_postgres, "start")
            print("  PostgreSQL started again")

        await asyncio.gather(outage(), *(client(i) for i in range(len(tokens))))
    return outcomes


async def _retries(
    url: str, tokens: list[str], outcomes: dict[tuple[int, int], Outcome]
) -> dict[tuple[int, int], Outcome]:
    again: dict[tuple[int, int], Outcome] = {}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        semaphore = asyncio.Semaphore(20)

        async def one(key: tuple[int, int]) -> None:
            index, n = key
            text = (GAS if n % 5 == 0 else NOISE).format(n=n)
            body = {"conversation_id": f"c-{index}", "client_message_id": f"m-{n}",
                    "message": text}  # fmt: skip
            async with semaphore:
                again[key] = Outcome()
                await _send(http, tokens[index], body, again[key])

        await asyncio.gather(*(one(key) for key in outcomes))
    return again


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"  # noqa: E501


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--outage-s", type=float, default=10.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.database_url, args.data_dir, args.ready_file)
        return 0

    name = f"nuisances_fault_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database_url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    upgrade(database_url)
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        devices = [repository.create_device(session, f"fault {i}") for i in range(args.clients)]
    tokens = [token for _, token in devices]
    device_index = {device.id: i for i, (device, _) in enumerate(devices)}
    folder = Path(tempfile.mkdtemp(prefix="fault-run-"))
    ready = folder / "ready"
    child = subprocess.Popen(  # noqa: S603 - this very script, fixed arguments
        [sys.executable, __file__, "--child", "--database-url", database_url,
         "--data-dir", str(folder / "data"), "--ready-file", str(ready)],
        stderr=(folder / "server.log").open("wb"),
    )  # fmt: skip
    failures: list[str] = []
    try:
        while not ready.exists():
            if child.poll() is not None:
                raise RuntimeError(f"the server did not start: see {folder / 'server.log'}")
            time.sleep(0.05)
        url = ready.read_text()
        sent = args.clients * args.messages
        print(f"{args.clients} clients x {args.messages} messages = {sent} requests, {url}")
        started = time.perf_counter()
        outcomes = asyncio.run(_load(url, tokens, args.messages, args.outage_s))
        print(f"  load done in {time.perf_counter() - started:.1f} s")
        spool = folder / "data" / "spool" / "turns.jsonl"
        drained = time.monotonic() + 60
        while spool.exists() and spool.stat().st_size and time.monotonic() < drained:
            time.sleep(0.5)
        print(f"  spool drained: {not spool.exists() or spool.stat().st_size == 0}")

        first_safety = sum(1 for o in outcomes.values() if o.kinds[:1] == ["safety"])
        ended_done = sum(1 for o in outcomes.values() if o.kinds[-1:] == ["done"])
        wrong_card = sum(
            1
            for (_, n), o in outcomes.items()
            if o.category != ("danger" if n % 5 == 0 else "rien")
        )
        retried = [o for o in outcomes.values() if o.attempts > 1]
        statuses = Counter(
            f"{o.done['source']}/{o.done['status']}" for o in outcomes.values() if o.done
        )
        print(f"card first: {first_safety}/{sent}; wrong category: {wrong_card}")
        print(f"ended with done: {ended_done}/{sent}; conflicts: "
              f"{sum(o.conflict for o in outcomes.values())}")  # fmt: skip
        print(f"answers: {dict(sorted(statuses.items()))}")
        print(f"requests retried by the client after a cut: {len(retried)}")
        print(f"first event: {_ms([o.first_event_s or 0.0 for o in outcomes.values()])}")
        print(f"whole request: {_ms([o.total_s for o in outcomes.values()])}")

        with make_session_factory(engine)() as session:
            from sqlalchemy import select

            from server.db.models import Conversation, Turn

            rows = session.execute(
                select(Turn.device_id, Conversation.external_id, Turn.client_message_id,
                       Turn.state, Turn.reply)
                .join(Conversation, Turn.conversation_id == Conversation.id)
            ).all()  # fmt: skip
        states = Counter(row.state for row in rows)
        keys = Counter((row.device_id, row.external_id, row.client_message_id) for row in rows)
        mismatched = 0
        for row in rows:
            index = device_index[row.device_id]
            outcome = outcomes.get((index, int(row.client_message_id.removeprefix("m-"))))
            if outcome is None or outcome.done is None or outcome.done["text"] != row.reply:
                mismatched += 1
        print(f"stored: {len(rows)}/{sent} turns, states {dict(states)}, "
              f"duplicates {sum(c - 1 for c in keys.values())}, "
              f"replies differing from the answer sent {mismatched}")  # fmt: skip

        started = time.perf_counter()
        again = asyncio.run(_retries(url, tokens, outcomes))
        replayed = sum(
            1
            for key, o in again.items()
            if o.done
            and o.done.get("replayed")
            and o.done["text"] == (outcomes[key].done or {}).get("text")
        )
        print(f"retry of every message after the run: {replayed}/{sent} replayed the same "
              f"answer; {_ms([o.total_s for o in again.values()])}")  # fmt: skip
        retries = [*(o for o in outcomes.values() if o.attempts > 1), *again.values()]
        slowest_retry = max(o.total_s for o in retries)
        slowest_first = max(o.total_s for o in outcomes.values() if o.attempts == 1)
        print(f"slowest retry: {slowest_retry:.2f} s; slowest first try: {slowest_first:.2f} s "
              f"(turn budget {TURN_BUDGET_S:g} s)")  # fmt: skip

        checks = {
            "every request got its card first": first_safety == sent and wrong_card == 0,
            "every request ended with done": ended_done == sent,
            "stored = sent, all done, no duplicate": len(rows) == sent
            and states == Counter({"done": sent})
            and all(c == 1 for c in keys.values())
            and mismatched == 0,
            "every retry replayed": replayed == sent,
            "no retry slower than the turn budget": slowest_retry <= TURN_BUDGET_S,
        }
        for label, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {label}")
            if not ok:
                failures.append(label)
    finally:
        child.terminate()
        child.wait(timeout=30)
        engine.dispose()
        _ensure_postgres()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    return 1 if failures else 0


def _ensure_postgres() -> None:
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=2).close()
    except psycopg.OperationalError:
        _postgres("start")


if __name__ == "__main__":
    sys.exit(main())
