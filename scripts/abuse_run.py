"""Abuse run: the real API under the abuses of the incident, one table row per case.

The API runs as ``nuisances serve`` does (``create_app`` + uvicorn with ``uvicorn_options``:
the connection protection, the log filter) in a child process, on a temporary SQLite
database, with no model (provider ``none``: the deterministic fallback answers). Cases:

- idle: ``--idle`` silent sockets (3,000 against ``max_connections`` 1,000), held 15 s;
- slow headers: 100 clients sending one byte of a header every 2 s;
- slow body: 100 clients sending the headers of a chat request, then one body byte every 2 s;
- failed logins: 2,000 random tokens as fast as possible, from one address;
- one greedy device: 5 requests always in flight against a one-slot model (the fake Ollama,
  one second per answer, 4 waiting places), while another device sends one at a time: what
  each of them got (a server of its own, with the fake model in it).

Throughout each case, ``/healthz`` and a chat request (valid token) are probed every 200 ms
from another address (as the reverse proxy tells it, ``X-Forwarded-For``): success rate and
p99 latency. Also per case: the most file handles the server held, how long the abusive
connections lasted, the statuses they got, and how much the server wrote on stderr. Prints
figures; asserts nothing.

    .venv/bin/python scripts/abuse_run.py [--idle 3000] [--max-connections 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm.config import ProviderConfig
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.settings import AdmissionSettings, LimitsSettings, Settings
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

HOST = "127.0.0.1"
PROBE_FROM = {"X-Forwarded-For": "198.51.100.10"}  # a person, behind the reverse proxy
ATTACKER = {"X-Forwarded-For": "203.0.113.66"}


def _settings(
    database_url: str, data_dir: Path, max_connections: int, model_url: str | None = None
) -> Settings:
    provider = (
        ProviderConfig(type="none")
        if model_url is None
        else ProviderConfig(base_url=model_url, model=DEFAULT_MODEL, parallel=1)
    )
    return Settings(
        database_url=database_url,
        provider=provider,
        admission=AdmissionSettings(quota_per_device=None, quota_global=None, max_waiting=4),
        limits=LimitsSettings(max_connections=max_connections),
        warm_up=False,
        cache_ttl_s=0,  # every answer generated: the greedy case measures the model slot
        data_dir=data_dir,
        log_level="INFO",
    )


def _child(
    database_url: str, data_dir: Path, port: int, max_connections: int, fake: bool = False
) -> None:
    import uvicorn

    from server.logs import configure_logging
    from server.main import create_app
    from server.serving import uvicorn_options

    with contextlib.ExitStack() as stack:
        model_url = None
        if fake:  # one second per answer: 20 chunks 50 ms apart
            answer = Behaviour.normal("Notez la date et l'heure de chaque épisode. " * 2,
                                      chunk_size=4, delay=0.05)  # fmt: skip
            model_url = stack.enter_context(
                FakeOllama(models=[DEFAULT_MODEL], loaded=True, default=answer)
            ).url
        settings = _settings(database_url, data_dir, max_connections, model_url)
        configure_logging(settings.log_level, settings.limits.log_interval_s)
        app = create_app(settings, migrate=False, freeze_gc=True)
        uvicorn.run(app, host=HOST, port=port, **uvicorn_options(settings))


class Probe:
    """``/healthz`` and a chat request every 200 ms, each on a new connection."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.results: dict[str, list[tuple[bool, float]]] = {"healthz": [], "chat": []}
        self.stop = asyncio.Event()
        self.tag = secrets.token_hex(4)  # one per case: every probe is a new message

    async def _one(self, http: httpx.AsyncClient, kind: str, n: int) -> None:
        started = time.perf_counter()
        try:
            if kind == "healthz":
                response = await http.get("/healthz", headers=PROBE_FROM)
            else:
                body = {"conversation_id": "probe", "client_message_id": f"p-{n}-{self.tag}",
                        "message": "le voisin fait du bruit le soir, que faire ?"}  # fmt: skip
                headers = {**PROBE_FROM, "Authorization": f"Bearer {self.token}"}
                response = await http.post("/v1/chat", json=body, headers=headers)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        self.results[kind].append((ok, time.perf_counter() - started))

    async def run(self) -> None:
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=self.url, timeout=10, limits=limits) as http:
            n, pending = 0, set()
            while not self.stop.is_set():
                n += 1
                for kind in ("healthz", "chat"):
                    pending.add(asyncio.create_task(self._one(http, kind, n)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), 0.2)
            await asyncio.gather(*pending)

    def summary(self, kind: str) -> str:
        results = self.results[kind]
        if not results:
            return "-"
        ok = sum(1 for good, _ in results if good)
        times = sorted(t for _, t in results)
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        return f"{ok}/{len(results)} ok, p99 {p99 * 1000:.0f} ms"


def _size(path: Path) -> int:
    return path.stat().st_size


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


async def _abuser(port: int, head: bytes, drip: bool, hold_s: float, out: dict[str, Any]) -> None:
    """One connection: sends ``head`` (then a byte every 2 s when ``drip``), and reads what
    the server says until it closes it: ``closed_s`` after connecting (None: still open)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
    except (OSError, TimeoutError):
        out.update(status="connect failed", closed_s=0.0)
        return
    started, data = time.monotonic(), b""
    writer.write(head)

    async def dripping() -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while drip:
                await asyncio.sleep(2.0)
                writer.write(b"x")
                await writer.drain()

    task = asyncio.create_task(dripping())
    out["closed_s"] = None
    with contextlib.suppress(TimeoutError):
        try:
            async with asyncio.timeout(hold_s):
                while chunk := await reader.read(65536):
                    data += chunk
        except ConnectionError:
            pass
        out["closed_s"] = time.monotonic() - started
    task.cancel()
    writer.close()
    out["status"] = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "none"


async def crowd_case(
    port: int, count: int, head: bytes, drip: bool, hold_s: float
) -> dict[str, Any]:
    """``count`` abusers, started 200 at a time (the listen backlog is 2,048)."""
    outs: list[dict[str, Any]] = [{} for _ in range(count)]
    tasks = []
    for first in range(0, count, 200):
        batch = outs[first : first + 200]
        tasks += [asyncio.create_task(_abuser(port, head, drip, hold_s, o)) for o in batch]
        await asyncio.sleep(0.05)
    await asyncio.gather(*tasks)
    return {"outs": outs}


async def login_case(url: str, attempts: int, concurrency: int = 50) -> dict[str, Any]:
    """``attempts`` random tokens, ``concurrency`` at a time on kept-alive connections."""
    statuses: Counter[str] = Counter()
    todo = iter(range(attempts))
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as http:

        async def attacker() -> None:  # a worker each: no queue of 2,000 in httpx's pool
            for _ in todo:
                headers = {**ATTACKER, "Authorization": f"Bearer {secrets.token_urlsafe(32)}"}
                try:
                    response = await http.get("/v1/directory", headers=headers)
                    statuses[str(response.status_code)] += 1
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1

        await asyncio.gather(*(attacker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"statuses": statuses, "rate": attempts / elapsed}


async def greedy_case(url: str, greedy: str, other: str, duration_s: float) -> dict[str, Any]:
    """A device keeps 5 requests in flight; another sends one at a time. What each got."""
    got: dict[str, Counter[str]] = {"greedy": Counter(), "other": Counter()}
    end = time.monotonic() + duration_s
    limits = httpx.Limits(max_connections=20)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

        async def sender(who: str, token: str) -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                body = {
                    "conversation_id": f"{who}-{secrets.token_hex(3)}",
                    "client_message_id": f"m{n}",
                    "message": "le voisin crie la nuit",
                }
                try:
                    response = await http.post(
                        "/v1/chat", json=body, headers={"Authorization": f"Bearer {token}"}
                    )
                except httpx.HTTPError as exc:
                    got[who][type(exc).__name__] += 1
                    continue
                answer = response.json()
                status = (
                    f"{answer['source']}/{answer['status']}"
                    if "status" in answer
                    else answer["error"]["code"]
                )
                got[who][f"{response.status_code} {status}"] += 1
                if response.status_code == 429:  # as a client told to wait
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))

        await asyncio.gather(*(sender("greedy", greedy) for _ in range(5)), sender("other", other))
    return {"statuses": got["greedy"], "other": got["other"]}


def _greedy_row(args: argparse.Namespace, folder: Path) -> tuple[str, str, str, str, str, str, str]:
    """The greedy-device case, on a server of its own with the fake model."""
    database_url = f"sqlite:///{folder / 'greedy.db'}"
    upgrade(database_url)
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        greedy = repository.create_device(session, "greedy")[1]
        other = repository.create_device(session, "other")[1]
    engine.dispose()
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    log = folder / "greedy.log"
    child = subprocess.Popen(  # noqa: S603 - this very script, fixed arguments
        [sys.executable, __file__, "--fake", "--child", database_url, str(folder / "greedy-data"),
         str(port)], stderr=log.open("wb"), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://{HOST}:{port}"
    try:
        _wait_ready(url, child, log)
        result = asyncio.run(greedy_case(url, greedy, other, 20.0))
    finally:
        child.terminate()
        child.wait(timeout=30)
    return (
        "greedy device x5",
        _show(result["statuses"]),
        "at most 2 in flight, 1 waiting",
        "-",
        "-",
        f"other device: {_show(result['other'])}",
        f"{_size(log) / 1024:.1f} KiB",
    )


def _show(counts: Counter[str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


def _wait_ready(url: str, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not start: see {log}")


async def run_case(url: str, token: str, pid: int, log: Path,
                   case: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
    probe = Probe(url, token)
    before_log, fds = _size(log), [_fds(pid)]
    probing = asyncio.create_task(probe.run())

    async def sample() -> None:
        while True:
            fds.append(_fds(pid))
            await asyncio.sleep(0.1)

    sampling = asyncio.create_task(sample())
    result = await case()
    await asyncio.sleep(0.5)
    probe.stop.set()
    await probing
    sampling.cancel()
    result.update(probe=probe, fds=(fds[0], max(fds)), stderr=_size(log) - before_log)
    return result


def _lasted(outs: list[dict[str, Any]]) -> str:
    """How long the abusive connections stayed open."""
    closed = sorted(o["closed_s"] for o in outs if o["closed_s"] is not None)
    still = len(outs) - len(closed)
    if not closed:
        return f"none closed by the server ({still} open at the end)"
    median = closed[len(closed) // 2]
    return f"closed by the server after median {median:.1f} s, max {closed[-1]:.1f} s; {still} open"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--logins", type=int, default=2000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), int(args.child[2]), args.max_connections,
               args.fake)  # fmt: skip
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # our side opens thousands
    folder = Path(tempfile.mkdtemp(prefix="abuse-run-"))
    database_url = f"sqlite:///{folder / 'abuse.db'}"
    upgrade(database_url)
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        token = repository.create_device(session, "abuse probe")[1]
    engine.dispose()
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    url = f"http://{HOST}:{port}"
    log = folder / "server.log"
    child = subprocess.Popen(  # noqa: S603 - this very script, fixed arguments
        [sys.executable, __file__, "--max-connections", str(args.max_connections),
         "--child", database_url, str(folder / "data"), str(port)],
        stderr=log.open("wb"), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_ready(url, child, log)
        print(f"server pid {child.pid} on {url}, max_connections {args.max_connections}, "
              f"header/body timeouts 10 s; our RLIMIT_NOFILE {soft} -> {hard}")  # fmt: skip
        print(f"server log: {log}")
        get_head = b"GET /healthz HTTP/1.1\r\nHost: abuse\r\nX-Slow: "
        n = args.clients
        post_head = (b"POST /v1/chat HTTP/1.1\r\nHost: abuse\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")  # fmt: skip
        cases: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            (f"idle x{args.idle}", lambda: crowd_case(port, args.idle, b"", False, 15.0)),
            (f"slow headers x{n}", lambda: crowd_case(port, n, get_head, True, 40.0)),
            (f"slow body x{n}", lambda: crowd_case(port, n, post_head, True, 60.0)),
            (f"bad tokens x{args.logins}", lambda: login_case(url, args.logins)),
        ]
        rows = []
        for name, case in cases:
            print(f"  running: {name}", flush=True)
            result = asyncio.run(run_case(url, token, child.pid, log, case))
            if "outs" in result:
                statuses = Counter(o["status"] for o in result["outs"])
                got = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
                bounded = _lasted(result["outs"])
            else:
                got = ", ".join(f"{k}: {v}" for k, v in sorted(result["statuses"].items()))
                bounded = f"{result['rate']:.0f} req/s"
            probe: Probe = result["probe"]
            rows.append((name, got, bounded, f"{result['fds'][0]} -> {result['fds'][1]}",
                         probe.summary("healthz"), probe.summary("chat"),
                         f"{result['stderr'] / 1024:.1f} KiB"))  # fmt: skip
            time.sleep(1.0)
        print("  running: greedy device x5", flush=True)
        rows.append(_greedy_row(args, folder))
        header = ("case", "statuses the abusers got", "abusive connections", "server fds",
                  "/healthz", "chat", "stderr")  # fmt: skip
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, tuple("-" * w for w in widths), *rows]:
            print(" | ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)))
    finally:
        child.terminate()
        child.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
