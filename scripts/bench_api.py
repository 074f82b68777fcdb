"""Throughput and latency of the chat API as deployed: ``nuisances serve [--workers N]`` in a
child process, on a real database, its fake model (``tests.fakes.FakeOllama``) in a process of
its own, and this process generating the load: three processes (or more), three GILs.

A. Model busy: the model's only slot is held by an endless generation, no waiting place; 100
   clients back to back (closed loop) send a danger message and get the card then a fallback;
   once with HTTP keep-alive, once with a new connection per request.
B. Fixed timing: the fake answers in 20 chunks 5 ms apart; ``--parallel`` slots (1 by
   default, as one CPU model server has); 10 then 100 clients back to back.

For each run: throughput (turns/s), card latency (request sent -> first SSE event, ``event:
safety``) p50/p90/p99/max (each client's first turn apart: every client starts in the same
instant, a burst rather than back-to-back traffic), done latency (-> ``event: done``)
p50/p99, requests closed without an answer (no byte at all, or a stream that ended without
``done``), HTTP statuses and turn statuses seen. Each server's fake records the most
generations it ever served at once: the one-slot guarantee is that it never exceeds the
provider's slots, whatever the number of workers (a line says VIOLATION otherwise, and the
exit code is 1).

Databases: a temporary SQLite file for one worker, a fresh PostgreSQL database (created on
``--postgres-admin-url``, dropped afterwards) for several or with ``--postgres``; or
``--database-url`` for all. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_api.py [--workers 1 2 4] [--requests 300] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import platform
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

DANGER = "ça pue le gaz dans l'escalier depuis ce matin"
NOISE = "le voisin fait du bruit tous les soirs, que faire ?"
# 100 characters in 5-character chunks: 20 chunks, 5 ms apart (95 ms of streaming).
ANSWER = ("Notez chaque épisode dans le journal, avec l'heure. " * 2)[:100]
ADMIN_URL = os.environ.get("NUISANCES_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BUSY_CLIENTS = 100
TIMING_CLIENTS = (10, 100)
UNLIMITED = 10_000_000  # quotas: None cannot be spelt in an environment variable


# -- the fake model, in its own process ---------------------------------------------------------


def _fake_child(scenario: str) -> None:
    """Serve the fake model until told to stop; a JSON line on stdout per command on stdin.

    First line: ``{"url": ...}``. Then ``stats`` answers the counters; ``stop`` answers them
    a last time and exits (the end of stdin exits too, silently).
    """
    behaviour = Behaviour.normal(ANSWER, chunk_size=5, delay=0.005)
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=behaviour) as fake:
        if scenario == "busy":
            # One chunk a second: the num_predict cap (400) would end it only after the bench.
            fake.enqueue(Behaviour.endless(chunk="occupé ", delay=1.0))
        print(json.dumps({"url": fake.url}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            generations = sum(1 for body in fake.requests if body.get("messages"))
            stats = {
                "generating": fake.generating,
                "max_concurrent": fake.max_concurrent,
                "generations": generations,
            }
            print(json.dumps(stats), flush=True)
            if command == "stop":
                break


class FakeModel:
    """The parent's handle on the fake model's process."""

    def __init__(self, scenario: str) -> None:
        self._process = subprocess.Popen(  # noqa: S603 - this very script, fixed arguments
            [sys.executable, __file__, "--child", "fake", "--scenario", scenario],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url: str = self._read()["url"]

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError("the fake model's process ended unexpectedly")
        result: dict[str, Any] = json.loads(line)
        return result

    def _command(self, command: str) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._read()

    def stats(self) -> dict[str, Any]:
        """Generations in progress, the peak so far, and how many were served."""
        return self._command("stats")

    def close(self) -> dict[str, Any]:
        """Stop the fake; its last counters."""
        try:
            return self._command("stop")
        finally:
            assert self._process.stdin is not None
            with contextlib.suppress(OSError):
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


# -- databases ----------------------------------------------------------------------------------


def _psycopg_url(admin_url: str) -> str:
    return admin_url.replace("postgresql+psycopg://", "postgresql://", 1)


def _describe_url(url: str) -> str:
    """A database URL without credentials: ``PostgreSQL host:port/name`` or ``SQLite path``."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite {parsed.database}"
    return f"PostgreSQL {parsed.host}:{parsed.port or 5432}/{parsed.database}"


def _postgres_version(admin_url: str) -> str:
    import psycopg

    try:
        with psycopg.connect(_psycopg_url(admin_url), connect_timeout=3) as connection:
            row = connection.execute("SHOW server_version").fetchone()
    except psycopg.OperationalError as exc:
        raise SystemExit(f"PostgreSQL unreachable at {_describe_url(admin_url)}: {exc}") from exc
    return str(row[0]).split()[0] if row else "?"


@contextmanager
def _postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database; yields its SQLAlchemy URL, drops it afterwards."""
    import psycopg
    from psycopg import sql

    admin = _psycopg_url(admin_url)
    name = f"nuisances_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@dataclass(frozen=True)
class Databases:
    """Where each server's data lives: given, or created fresh for it."""

    given: str | None
    postgres: bool
    admin_url: str

    def uses_postgres(self, workers: int) -> bool:
        if self.given is not None:
            return not self.given.startswith("sqlite")
        return self.postgres or workers > 1

    def describe(self, workers: list[int]) -> str:
        if self.given is not None:
            return _describe_url(self.given)
        parts = []
        sqlite = [n for n in workers if not self.uses_postgres(n)]
        postgres = [n for n in workers if self.uses_postgres(n)]
        if sqlite:
            parts.append(f"SQLite (a temporary file per server) for {_workers(sqlite)}")
        if postgres:
            version = _postgres_version(self.admin_url)
            where = _describe_url(self.admin_url).split()[1].rsplit("/", 1)[0]
            parts.append(
                f"PostgreSQL {version} at {where} (a fresh database per server) "
                f"for {_workers(postgres)}"
            )
        return ", ".join(parts)

    @contextmanager
    def fresh(self, workers: int, scratch: Path) -> Iterator[str]:
        if self.given is not None:
            yield self.given
        elif self.uses_postgres(workers):
            with _postgres_database(self.admin_url) as url:
                yield url
        else:
            yield f"sqlite:///{scratch / 'bench.db'}"


def _workers(counts: list[int]) -> str:
    return f"{', '.join(map(str, counts))} worker{'s' if counts != [1] else ''}"


def _tokens(database_url: str, count: int) -> list[str]:
    """Migrate the database and create ``count`` devices: one bearer token per client."""
    from server.db import repository
    from server.db.migrate import upgrade
    from server.db.session import make_engine, make_session_factory

    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            return [repository.create_device(session, f"bench-{i}")[1] for i in range(count)]
    finally:
        engine.dispose()


# -- the API, as deployed -----------------------------------------------------------------------


def _nuisances() -> str:
    beside = Path(sys.executable).parent / "nuisances"
    found = str(beside) if beside.exists() else shutil.which("nuisances")
    if found is None:
        raise SystemExit("no `nuisances` command: run scripts/bootstrap first")
    return found


def serve_has_workers() -> bool:
    """Whether ``nuisances serve`` takes ``--workers`` (several API processes)."""
    help_text = subprocess.run(  # noqa: S603 - our own command, fixed arguments
        [_nuisances(), "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
    ).stdout
    return "--workers" in help_text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ServerConfig:
    workers: int
    parallel: int
    max_waiting: int
    wait_s: float


def _environment(
    config: ServerConfig, database_url: str, model_url: str, data: Path
) -> dict[str, str]:
    """The deployment's settings, all through ``NUISANCES_*`` variables (inherited ones
    dropped, so that a developer's own configuration cannot leak in)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("NUISANCES_")}
    settings = {
        "DATABASE_URL": database_url,
        "PROVIDER__BASE_URL": model_url,
        "PROVIDER__MODEL": DEFAULT_MODEL,
        "PROVIDER__PARALLEL": config.parallel,
        "ADMISSION__MAX_WAITING": config.max_waiting,
        "ADMISSION__WAIT_S": config.wait_s,
        "ADMISSION__QUOTA_PER_DEVICE": UNLIMITED,
        "ADMISSION__QUOTA_GLOBAL": UNLIMITED,
        # The endless generation must hold its slot for the whole run: no loop detection, no
        # total or idle budget that would end it first.
        "BUDGETS__LOOP_REPEATS": 100_000,
        "BUDGETS__TOTAL_S": 600,
        "BUDGETS__FIRST_TOKEN_S": 60,
        "BUDGETS__IDLE_S": 60,
        "WARM_UP": "false",
        "HEALTH_INTERVAL_S": 3600,
        "CACHE_TTL_S": 0,
        "LOG_LEVEL": "WARNING",
        "DATA_DIR": data,
        "CREATE_FIRST_TOKEN": "false",
        "SECRET": secrets.token_hex(32),  # one deployment secret, shared by the workers
    }
    env.update({f"NUISANCES_{key}": str(value) for key, value in settings.items()})
    return env


@contextmanager
def api_server(
    config: ServerConfig, database_url: str, model_url: str, scratch: Path
) -> Iterator[str]:
    """``nuisances serve`` on a free port until the block ends (SIGTERM); yields its URL once
    ``/healthz`` answers 200."""
    port = _free_port()
    command = [_nuisances(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    if config.workers > 1:
        command += ["--workers", str(config.workers)]
    data = scratch / "data"
    data.mkdir(exist_ok=True)
    log_path = scratch / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(  # noqa: S603 - our own command, fixed arguments
            command,
            env=_environment(config, database_url, model_url, data),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the workers can be stopped with it
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, url, log_path)
        yield url
    finally:
        _stop(process)


def _wait_healthy(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"`nuisances serve` exited ({process.returncode}):\n{_tail(log_path)}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"`nuisances serve` not healthy after 120 s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # The supervisor and its workers (its process group, its pid while not reaped).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# -- the load -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the clients of one configuration saw."""

    card: list[float] = field(default_factory=list)  # seconds, per request with a card
    done: list[float] = field(default_factory=list)  # seconds, per request that got `done`
    # Each client's first turn: all clients start in the same instant, a burst rather than
    # back-to-back traffic, and their tokens are checked in the database: reported apart.
    first_card: list[float] = field(default_factory=list)
    no_response: int = 0  # connection closed before any byte of a response
    no_done: int = 0  # a stream that ended (or broke) without `done` nor `error`
    http: Counter[int] = field(default_factory=Counter)
    turn: Counter[str] = field(default_factory=Counter)  # done's status, or error's code
    errors: Counter[str] = field(default_factory=Counter)  # other client-side failures
    wall: float = 0.0


def _address(client: int) -> str:
    """The address of client number ``client`` (from 0), as the reverse proxy forwards it."""
    number = client + 1
    return f"10.{number // 65_536 % 256}.{number // 256 % 256}.{number % 256}"


async def _turn(
    http: httpx.AsyncClient,
    token: str,
    address: str,
    message: str,
    outcome: Outcome,
    first: bool = False,
) -> None:
    """One chat turn over SSE in a fresh conversation, timed from the request being sent.

    As behind the deployment's nginx, the client's address comes in ``X-Forwarded-For``
    (trusted from 127.0.0.1): the per-address limits see one address per client, not the
    whole load coming from 127.0.0.1.
    """
    body = {
        "conversation_id": f"c-{uuid.uuid4().hex[:12]}",
        "client_message_id": uuid.uuid4().hex,
        "message": message,
    }
    headers = {
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {token}",
        "X-Forwarded-For": address,
    }
    answered = ended = carded = False
    start = time.perf_counter()
    try:
        async with http.stream("POST", "/v1/chat", headers=headers, json=body) as response:
            answered = True
            outcome.http[response.status_code] += 1
            if response.status_code != 200:
                await response.aread()
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    outcome.turn[f"refused {response.json()['error']['code']}"] += 1
                return
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                    elapsed = time.perf_counter() - start
                    if event == "safety" and not carded:
                        carded = True
                        (outcome.first_card if first else outcome.card).append(elapsed)
                    elif event == "done" and not first:
                        outcome.done.append(elapsed)
                elif line.startswith("data:") and event in ("done", "error"):
                    data = json.loads(line.removeprefix("data:"))
                    ended = True
                    if event == "done":
                        outcome.turn[str(data.get("status"))] += 1
                    else:
                        outcome.turn[f"error {data.get('error', {}).get('code')}"] += 1
        if not ended:
            outcome.no_done += 1
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        if not answered:
            outcome.no_response += 1
        elif not ended:
            outcome.no_done += 1
        outcome.errors[type(exc).__name__] += 1
    except httpx.HTTPError as exc:
        outcome.errors[type(exc).__name__] += 1


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context()


async def closed_loop(
    url: str, tokens: list[str], message: str, total: int, *, keepalive: bool, shared: bool
) -> Outcome:
    """``len(tokens)`` clients (one device each) send ``total`` turns in all, each the next
    as soon as its previous one is answered.

    Each client has an ``httpx.AsyncClient`` of its own, as each phone has its connection,
    unless ``shared``: then one client with a pool of ``clients + 4`` connections. That pool
    costs the load generator O(requests x connections) per request and per response
    (httpcore 1.0's ``_assign_requests_to_connections``, over every idle connection too):
    with 100 kept-alive connections it takes about 16 ms of CPU a turn, more than the API.
    """
    clients = len(tokens)
    outcome = Outcome()
    pool = clients + 4 if shared else 1
    limits = httpx.Limits(
        max_connections=pool,
        max_keepalive_connections=pool if keepalive else 0,
        keepalive_expiry=60,
    )
    options: dict[str, Any] = {
        "base_url": url,
        "timeout": httpx.Timeout(120, connect=30),
        "limits": limits,
        "headers": {} if keepalive else {"Connection": "close"},
        "verify": _ssl_context(),  # plain HTTP: one context, not one per client
    }
    remaining = iter(range(total))
    async with contextlib.AsyncExitStack() as stack:
        if shared:
            https = [await stack.enter_async_context(httpx.AsyncClient(**options))] * clients
        else:
            https = [await stack.enter_async_context(httpx.AsyncClient(**options)) for _ in tokens]

        async def client(http: httpx.AsyncClient, token: str, address: str) -> None:
            for number, _ in enumerate(remaining):
                await _turn(http, token, address, message, outcome, first=number == 0)

        started = time.perf_counter()
        await asyncio.gather(
            *(
                client(http, token, _address(index + 1))
                for index, (http, token) in enumerate(zip(https, tokens, strict=True))
            )
        )
        outcome.wall = time.perf_counter() - started
    return outcome


@asynccontextmanager
async def held_slot(url: str, token: str, fake: FakeModel) -> AsyncIterator[None]:
    """A turn whose generation never ends holds the model's slot until the block ends."""

    async def hold() -> None:
        body = {"conversation_id": "hold", "client_message_id": "hold", "message": NOISE}
        headers = {
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {token}",
            "X-Forwarded-For": _address(0),
        }
        async with (
            httpx.AsyncClient(base_url=url, timeout=600) as http,
            http.stream("POST", "/v1/chat", headers=headers, json=body) as response,
        ):
            async for _ in response.aiter_lines():
                pass

    task = asyncio.create_task(hold())
    try:
        deadline = time.monotonic() + 30
        while fake.stats()["generating"] < 1:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("the endless generation did not start")
            await asyncio.sleep(0.05)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task


# -- report -------------------------------------------------------------------------------------


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted values, in milliseconds (nan when empty)."""
    if not ordered:
        return math.nan
    return 1000 * ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _counts(counter: Counter[Any]) -> str:
    return ", ".join(f"{key}×{count}" for key, count in sorted(counter.items(), key=str))


def report(label: str, outcome: Outcome, total: int) -> None:
    card, done = sorted(outcome.card), sorted(outcome.done)
    first = sorted(outcome.first_card)
    closed = outcome.no_response + outcome.no_done
    print(
        f"  {label}: {total} turns, {(len(done) + len(first)) / outcome.wall:6.1f} turns/s | "
        "card p50 "
        f"{_quantile(card, 0.5):6.1f} p90 {_quantile(card, 0.9):6.1f} p99 "
        f"{_quantile(card, 0.99):6.1f} max {_quantile(card, 1.0):6.1f} ms | done p50 "
        f"{_quantile(done, 0.5):6.1f} p99 {_quantile(done, 0.99):6.1f} ms",
        flush=True,
    )
    if first:
        print(
            f"      not counted above, each client's first turn ({len(first)}, all at once): "
            f"card p50 {_quantile(first, 0.5):.1f} p99 "
            f"{_quantile(first, 0.99):.1f} ms",
            flush=True,
        )
    errors = f"; client errors: {_counts(outcome.errors)}" if outcome.errors else ""
    print(
        f"      closed without an answer: {closed} (no byte {outcome.no_response}, no done "
        f"{outcome.no_done}) | HTTP {_counts(outcome.http)} | turn {_counts(outcome.turn)}"
        f"{errors}",
        flush=True,
    )


def _log_summary(path: Path) -> Counter[str]:
    """The server's warnings and errors by logger, event and error (repeats included)."""
    found: Counter[str] = Counter()
    with contextlib.suppress(OSError), path.open(errors="replace") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict):  # the "serving on" line, or a raw traceback
                if line.startswith("Traceback"):
                    found["traceback (not logged as JSON)"] += 1
                continue
            if entry.get("level") not in ("warning", "error", "critical"):
                continue
            error = f" ({entry['error']})" if entry.get("error") else ""
            name = f"{entry.get('level')} {entry.get('logger')}: {entry.get('event')}{error}"
            found[name] += 1 + int(entry.get("suppressed") or 0)
    return found


def report_log(found: Counter[str]) -> None:
    if not found:
        print("  server log: no warning", flush=True)
        return
    print(f"  server log: {sum(found.values())} warnings and errors", flush=True)
    for name, count in found.most_common(6):
        print(f"      {count:5d}× {name}", flush=True)


def report_slots(stats: dict[str, Any], slots: int) -> bool:
    """Print the one-slot line; True when the guarantee held."""
    peak = int(stats["max_concurrent"])
    held = peak <= slots
    mark = "" if held else "  VIOLATION"
    print(
        f"  max concurrent generations: {peak} (slots: {slots}); "
        f"{stats['generations']} generations served{mark}",
        flush=True,
    )
    return held


# -- scenarios ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    requests: int
    parallel: int
    databases: Databases
    shared: bool  # one httpx client for all the clients (see closed_loop)

    def total(self, clients: int) -> int:
        return max(self.requests, 3 * clients)


@dataclass
class Deployment:
    url: str
    tokens: list[str]  # one device per client (and one for the endless generation)
    fake: FakeModel
    final: dict[str, Any] = field(default_factory=dict)  # the fake's last counters
    log: Counter[str] = field(default_factory=Counter)  # the server's warnings and errors


@contextmanager
def deployment(
    plan: Plan, scenario: str, config: ServerConfig, clients: int
) -> Iterator[Deployment]:
    """A fresh database with ``clients + 1`` devices, the fake model and the API; the fake's
    last counters are in ``final`` once the block has ended."""
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-api-{scenario}-") as scratch,
        plan.databases.fresh(config.workers, Path(scratch)) as database_url,
    ):
        tokens = _tokens(database_url, clients + 1)
        fake = FakeModel(scenario)
        run = Deployment("", tokens, fake)
        try:
            with api_server(config, database_url, fake.url, Path(scratch)) as url:
                run.url = url
                yield run
        finally:
            run.final = fake.close()
            run.log = _log_summary(Path(scratch) / "serve.log")


async def warm_up(url: str, tokens: list[str], message: str) -> None:
    """A few unmeasured turns, so that every worker has its connections and caches."""
    await closed_loop(
        url, tokens[: min(len(tokens), 8)], message, 16, keepalive=False, shared=False
    )


async def model_busy(plan: Plan, workers: int) -> bool:
    config = ServerConfig(workers=workers, parallel=1, max_waiting=0, wait_s=0.0)
    print(
        f"A. model busy, {_workers([workers])}: 1 slot held by an endless generation, no "
        f"waiting place; {BUSY_CLIENTS} clients back to back, danger message (card + fallback)",
        flush=True,
    )
    total = plan.total(BUSY_CLIENTS)
    with deployment(plan, "busy", config, BUSY_CLIENTS) as run:
        hold, clients = run.tokens[0], run.tokens[1:]
        async with held_slot(run.url, hold, run.fake):
            await warm_up(run.url, clients, DANGER)
            for keepalive in (True, False):
                outcome = await closed_loop(
                    run.url, clients, DANGER, total, keepalive=keepalive, shared=plan.shared
                )
                label = "keep-alive      " if keepalive else "connection/turn "
                report(f"{label}{BUSY_CLIENTS:3d} clients", outcome, total)
    report_log(run.log)
    return report_slots(run.final, 1)


async def fixed_timing(plan: Plan, workers: int) -> bool:
    config = ServerConfig(workers=workers, parallel=plan.parallel, max_waiting=100, wait_s=60.0)
    print(
        f"B. fixed timing, {_workers([workers])}: 20 chunks 5 ms apart, {plan.parallel} "
        f"slot{'s' if plan.parallel > 1 else ''}, up to 100 waiting 60 s; clients back to "
        "back with keep-alive, noise message",
        flush=True,
    )
    clients = max(TIMING_CLIENTS)
    with deployment(plan, "timing", config, clients) as run:
        await warm_up(run.url, run.tokens, NOISE)
        for count in TIMING_CLIENTS:
            total = plan.total(count)
            outcome = await closed_loop(
                run.url, run.tokens[:count], NOISE, total, keepalive=True, shared=plan.shared
            )
            report(f"keep-alive      {count:3d} clients", outcome, total)
    report_log(run.log)
    return report_slots(run.final, plan.parallel)


# -- main ---------------------------------------------------------------------------------------


def _machine() -> str:
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = f" ({line.split(':', 1)[1].strip()})"
                break
    usable_text = f", {usable} usable" if usable != cores else ""
    return f"{cores} cores{usable_text}{model}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--workers", type=int, nargs="+", help="API processes, each run in turn (default 1 2 4)"
    )
    parser.add_argument("--requests", type=int, help="turns per run, at least 3× the clients")
    parser.add_argument("--parallel", type=int, default=1, help="model slots in scenario B")
    parser.add_argument(
        "--shared-pool",
        action="store_true",
        help="one httpx client and pool for all the clients (costly for the load generator)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer turns, workers 1 and 2")
    parser.add_argument("--scenario", choices=("busy", "timing"), help="only this one")
    parser.add_argument("--database-url", help="one database for every run (default: fresh ones)")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL for 1 worker too")
    parser.add_argument("--postgres-admin-url", default=ADMIN_URL)
    parser.add_argument("--child", choices=("fake",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "fake":
        _fake_child(args.scenario)
        return

    workers: list[int] = args.workers or ([1, 2] if args.quick else [1, 2, 4])
    requests = args.requests or (60 if args.quick else 300)
    databases = Databases(args.database_url, args.postgres, args.postgres_admin_url)
    plan = Plan(requests, args.parallel, databases, shared=args.shared_pool)
    multi = serve_has_workers()
    print(
        f"machine: {_machine()} | database: {databases.describe(workers)} | workers: "
        f"{', '.join(map(str, workers))}",
        flush=True,
    )
    started = time.perf_counter()
    violated: list[str] = []
    for count in workers:
        if count > 1 and not multi:
            print(f"{_workers([count])}: skipped, `nuisances serve` has no --workers yet")
            continue
        if args.scenario in (None, "busy") and not asyncio.run(model_busy(plan, count)):
            violated.append(f"A with {_workers([count])}")
        if args.scenario in (None, "timing") and not asyncio.run(fixed_timing(plan, count)):
            violated.append(f"B with {_workers([count])}")
    verdict = f"VIOLATED in {', '.join(violated)}" if violated else "held in every run"
    print(f"one-slot guarantee: {verdict}; {time.perf_counter() - started:.0f} s in all")
    sys.exit(1 if violated else 0)


if __name__ == "__main__":
    main()
