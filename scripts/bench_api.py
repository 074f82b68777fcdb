"""Throughput and latency of the chat API, on a real uvicorn server and a real database.

1. Card plus fallback while the model slot is busy (one slot, no queue, held by an endless
   generation): what every person gets when the CPU is taken, at 1, 10 and 100 concurrent
   clients.
2. A fake model with fixed token timing (20 chunks, 5 ms apart), with as many slots as clients.
3. The API's added latency: a turn through HTTP versus chat_turn called directly, same fake.

Prints figures; asserts nothing.  .venv/bin/python scripts/bench_api.py [--requests 300]
[--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm.config import Budgets, ProviderConfig
from llm.turn import TurnRequest, chat_turn
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.services import Services
from server.settings import AdmissionSettings, Settings
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

DANGER = "ça pue le gaz dans l'escalier depuis ce matin"
NOISE = "le voisin fait du bruit tous les soirs, que faire ?"


def _settings(database_url: str, model_url: str, parallel: int, waiting: int) -> Settings:
    return Settings(
        database_url=database_url,
        provider=ProviderConfig(base_url=model_url, model=DEFAULT_MODEL, parallel=parallel),  # type: ignore[arg-type]
        budgets=Budgets(loop_repeats=100_000, total_s=600, first_token_s=60, idle_s=60),
        admission=AdmissionSettings(
            max_waiting=waiting, wait_s=0.0, quota_per_device=None, quota_global=None
        ),
        warm_up=False,
        health_interval_s=3600,
        data_dir=Path(tempfile.mkdtemp(prefix="bench-api-")),
        cache_ttl_s=0,
        log_level="WARNING",
    )


@contextmanager
def _serve(scenario: str, database_url: str) -> Iterator[tuple[str, str]]:
    """Start the API and its fake model in a child process (its own core and GIL); yield
    (base URL, bearer token)."""
    ready = Path(tempfile.mkdtemp(prefix="bench-ready-")) / "ready"
    child = subprocess.Popen(  # noqa: S603 - this very script, fixed arguments
        [
            sys.executable,
            __file__,
            "--child",
            scenario,
            "--database-url",
            database_url,
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server process did not start ({scenario})")
            time.sleep(0.05)
        url, token = ready.read_text().split()
        yield url, token
    finally:
        child.terminate()
        child.wait(timeout=20)


def _token(database_url: str) -> str:
    upgrade(database_url)
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        token = repository.create_device(session, "bench")[1]
    engine.dispose()
    return token


def _child(scenario: str, database_url: str, ready_file: Path) -> None:
    """The server side: fake model + API on a free port, until terminated."""
    behaviour = Behaviour.normal(
        "Notez chaque épisode dans le journal, avec l'heure. " * 2, chunk_size=5, delay=0.005
    )
    slots = {"busy": (1, 0), "timing": (64, 64), "single": (4, 4)}[scenario]
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=behaviour) as fake:
        settings = _settings(database_url, fake.url, *slots)
        token = _token(database_url)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(settings, freeze_gc=True),
                host="127.0.0.1",
                port=port,
                log_config=None,
                log_level="warning",
                backlog=2048,
            )
        )
        if scenario == "busy":
            # One chunk a second: the num_predict cap (400) would end it only after the bench.
            fake.enqueue(Behaviour.endless(chunk="occupé ", delay=1.0))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        if scenario == "busy":  # hold the only slot with an endless generation
            body = {"conversation_id": "hold", "client_message_id": "hold", "message": NOISE}
            threading.Thread(
                target=lambda: httpx.post(
                    f"http://127.0.0.1:{port}/v1/chat",
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=600,
                ),
                daemon=True,
            ).start()
            while not fake.requests:
                time.sleep(0.01)
        ready_file.write_text(f"http://127.0.0.1:{port} {token}")
        thread.join()


async def _load(
    url: str, token: str, message: str, clients: int, total: int
) -> tuple[list[float], float, set[str]]:
    latencies: list[float] = []
    statuses: set[str] = set()
    counter = iter(range(total))
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def worker() -> None:
            for _ in counter:
                await _send(http, token, message, latencies, statuses)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - started
    return latencies, wall, statuses


async def _send(
    http: httpx.AsyncClient,
    token: str,
    message: str,
    latencies: list[float],
    statuses: set[str],
) -> None:
    """One chat request in a fresh conversation; its latency and its outcome are recorded."""
    body = {
        "conversation_id": f"c-{uuid.uuid4().hex[:8]}",
        "client_message_id": uuid.uuid4().hex,
        "message": message,
    }
    start = time.perf_counter()
    try:
        response = await http.post(
            "/v1/chat", json=body, headers={"Authorization": f"Bearer {token}"}
        )
    except httpx.HTTPError as exc:
        statuses.add(f"error:{type(exc).__name__}")
        return
    latencies.append(time.perf_counter() - start)
    statuses.add(f"{response.status_code}:{response.json().get('status')}")


def _print(label: str, latencies: list[float], wall: float, statuses: set[str]) -> None:
    ordered = sorted(latencies)
    ms = [x * 1000 for x in ordered]
    print(
        f"  {label}: {len(ms) / wall:7.1f} req/s  p50 {statistics.median(ms):7.1f} ms  "
        f"p90 {ms[int(0.9 * (len(ms) - 1))]:7.1f} ms  p99 {ms[int(0.99 * (len(ms) - 1))]:7.1f} ms  "
        f"[{', '.join(sorted(statuses))}]"
    )


async def _paced(
    url: str, token: str, message: str, clients: int, every_s: float, duration_s: float
) -> tuple[list[float], float, set[str]]:
    """Open loop: each client sends a message every ``every_s`` seconds (with jitter), as
    phones do, whatever the answers' pace; latencies include any queueing at the server."""
    import random

    latencies: list[float] = []
    statuses: set[str] = set()
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def one() -> None:
            await _send(http, token, message, latencies, statuses)

        async def client(seed: int) -> None:
            rng = random.Random(seed)  # noqa: S311 - load pacing, not secrets
            await asyncio.sleep(rng.uniform(0, every_s))
            end = time.perf_counter() + duration_s
            pending = []
            while time.perf_counter() < end:
                pending.append(asyncio.create_task(one()))
                await asyncio.sleep(rng.uniform(0.5, 1.5) * every_s)
            await asyncio.gather(*pending)

        started = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        wall = time.perf_counter() - started
    return latencies, wall, statuses


async def busy_slot(database_url: str, requests: int) -> None:
    print("card + fallback while the model slot is busy (1 slot, no queue):")
    with _serve("busy", database_url) as (url, token):
        print(" closed loop (each client sends again as soon as answered):")
        for clients in (1, 10, 100):
            latencies, wall, statuses = await _load(
                url, token, DANGER, clients, max(requests, clients * 3)
            )
            _print(f"{clients:3d} clients", latencies, wall, statuses)
        print(" open loop (each client sends a message every 2 s on average):")
        for clients in (10, 100):
            latencies, wall, statuses = await _paced(url, token, DANGER, clients, 2.0, 20.0)
            _print(f"{clients:3d} clients", latencies, wall, statuses)


async def fixed_timing(database_url: str, requests: int) -> None:
    print("fake model, 20 chunks 5 ms apart, 64 slots:")
    with _serve("timing", database_url) as (url, token):
        for clients in (1, 10, 100):
            latencies, wall, statuses = await _load(
                url, token, NOISE, clients, max(requests, clients * 3)
            )
            _print(f"{clients:3d} clients", latencies, wall, statuses)


async def added_latency(database_url: str, requests: int) -> None:
    behaviour = Behaviour.normal(
        "Notez chaque épisode dans le journal, avec l'heure. " * 2, chunk_size=5, delay=0.005
    )
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=behaviour) as fake:
        services = Services.build(_settings(database_url, fake.url, 4, 4))
        direct = []
        for _ in range(requests // 3):
            start = time.perf_counter()
            async for _event in chat_turn(services.assistant, TurnRequest(NOISE)):
                pass
            direct.append(time.perf_counter() - start)
        await services.stop()
    with _serve("single", database_url) as (url, token):
        api, _, _ = await _load(url, token, NOISE, 1, requests // 3)
    d, a = statistics.median(direct) * 1000, statistics.median(api) * 1000
    print(
        f"API added latency (1 client): chat_turn direct median {d:.1f} ms, through HTTP "
        f"median {a:.1f} ms: {a - d:.1f} ms added (auth, detection, card, storage, JSON)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--child", choices=("busy", "timing", "single"), help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.database_url, args.ready_file)
        return
    database_url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='bench-db-')}/bench.db"
    print(f"database: {database_url.split('@')[-1]}")
    asyncio.run(busy_slot(database_url, args.requests))
    asyncio.run(fixed_timing(database_url, args.requests))
    asyncio.run(added_latency(database_url, args.requests))


if __name__ == "__main__":
    main()
