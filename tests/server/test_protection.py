"""A real uvicorn server with the connection protection: bounded idle connections, header and
body timeouts, 503 when every connection is busy, keep-alive left alone."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from server.main import create_app
from server.protection import FD_RESERVE, LIMITS_ENV, ProtectedH11Protocol
from server.serving import uvicorn_options
from server.settings import LimitsSettings
from tests.fakes import FakeOllama
from tests.live_server import serving
from tests.server.conftest import auth, chat_body, make_settings, new_token

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def live(tmp_path: Path, fake_ollama: FakeOllama, **limits: Any) -> Iterator[tuple[int, str, str]]:
    """The whole app on a real port with ``uvicorn_options``; yields (port, url, token)."""
    database_url = f"sqlite:///{tmp_path / 'protection.db'}"
    token = new_token(database_url)
    settings = make_settings(database_url, fake_ollama.url, limits=LimitsSettings(**limits))
    exported = os.environ.get(LIMITS_ENV)
    try:
        with serving(create_app(settings), **uvicorn_options(settings)) as url:
            yield int(url.rsplit(":", 1)[1]), url, token
    finally:  # uvicorn_options exported these limits for spawned workers: not for later tests
        if exported is None:
            os.environ.pop(LIMITS_ENV, None)
        else:
            os.environ[LIMITS_ENV] = exported


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def is_closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (without consuming what it sent)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionError:
        return True


def read_until_closed(sock: socket.socket, within_s: float) -> tuple[bytes, float | None]:
    """What the server sends until it closes, and when it closed (None: still open)."""
    started = time.monotonic()
    data = b""
    while time.monotonic() - started < within_s:
        readable, _, _ = select.select([sock], [], [], 0.05)
        if not readable:
            continue
        try:
            chunk = sock.recv(65536)
        except ConnectionError:
            return data, time.monotonic() - started
        if not chunk:
            return data, time.monotonic() - started
        data += chunk
    return data, None


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One whole HTTP/1.1 response (with a Content-Length) from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "closed in the middle of a body"
        body += chunk
    return int(status_line.split()[1]), headers, body


def parse(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body)


GET_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"


def test_idle_connections_beyond_the_bound_are_evicted_oldest_first(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    bound = 20
    with live(tmp_path, fake_ollama, max_connections=bound, header_timeout_s=30) as (
        port,
        url,
        token,
    ):
        idle = [connect(port) for _ in range(3 * bound)]
        try:
            deadline = time.monotonic() + 10
            while sum(map(is_closed, idle)) < 2 * bound and time.monotonic() < deadline:
                time.sleep(0.05)
            closed = [i for i, sock in enumerate(idle) if is_closed(sock)]
            assert closed == list(range(2 * bound))  # the oldest ones went, the newest stay
            # 60 idle sockets still open on our side: the API answers all the same.
            for _ in range(3):
                assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            body = chat_body("le voisin fait du bruit le soir", "m-flood")
            chat = httpx.post(f"{url}/v1/chat", json=body, headers=auth(token), timeout=10)
            assert chat.status_code == 200
            # The first probe evicted the oldest idle one left; each probe closed its own
            # connection when done, so the next ones may have found the room it left.
            assert 2 * bound + 1 <= sum(map(is_closed, idle)) <= 2 * bound + 4
        finally:
            for sock in idle:
                sock.close()


def test_slow_headers_get_408_and_are_closed_after_the_timeout(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    with live(tmp_path, fake_ollama, header_timeout_s=0.5) as (port, _, _):
        with connect(port) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            data, closed_at = b"", None
            while closed_at is None and time.monotonic() - started < 5:
                with contextlib.suppress(OSError):
                    sock.send(b"X")  # one byte of a header every 0.2 s, never the end
                chunk, closed = read_until_closed(sock, 0.2)
                data += chunk
                if closed is not None:
                    closed_at = time.monotonic() - started
        assert closed_at is not None, "the slow client was never closed"
        assert 0.5 <= closed_at <= 2.5
        status, headers, body = parse(data)
        assert status == 408
        assert headers["connection"] == "close"
        assert body["error"]["code"] == "header_timeout"
        assert body["error"]["message_fr"]
        assert body["error"]["message_en"]


def test_a_silent_connection_is_closed_after_the_header_timeout(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    with live(tmp_path, fake_ollama, header_timeout_s=0.5) as (port, _, _), connect(port) as sock:
        data, closed_at = read_until_closed(sock, 5)
    assert closed_at is not None
    assert 0.5 <= closed_at <= 2.5
    assert data == b""  # nothing asked, nothing answered


def _post_headers(length: int, expect: bool = False) -> bytes:
    return (
        b"POST /v1/chat HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {length}\r\n".encode()
        + (b"Expect: 100-continue\r\n" if expect else b"")
        + b"\r\n"
    )


def test_a_stalled_body_gets_408_body_timeout(tmp_path: Path, fake_ollama: FakeOllama) -> None:
    with live(tmp_path, fake_ollama, body_timeout_s=0.5) as (port, _, _), connect(port) as sock:
        sock.sendall(_post_headers(100) + b'{"conversation_id"')
        data, closed_at = read_until_closed(sock, 5)
    assert closed_at is not None
    assert 0.5 <= closed_at <= 2.5
    status, headers, body = parse(data)
    assert status == 408
    assert body["error"]["code"] == "body_timeout"
    assert body["error"]["message_fr"]
    assert body["error"]["message_en"]
    assert headers["connection"] == "close"


def test_a_trickled_body_is_cut_at_the_whole_body_deadline(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    """Each byte comes well within the per-piece timeout; the whole body may take one."""
    with live(tmp_path, fake_ollama, body_timeout_s=1.0) as (port, _, _), connect(port) as sock:
        sock.sendall(_post_headers(1000))
        started = time.monotonic()
        data, closed_at = b"", None
        while closed_at is None and time.monotonic() - started < 6:
            with contextlib.suppress(OSError):
                sock.send(b" ")
            chunk, closed = read_until_closed(sock, 0.2)
            data += chunk
            if closed is not None:
                closed_at = time.monotonic() - started
    assert closed_at is not None
    assert 1.0 <= closed_at <= 3.0
    status, _, body = parse(data)
    assert status == 408
    assert body["error"]["code"] == "body_timeout"


def test_with_every_connection_busy_a_new_one_gets_503_and_retry_after(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    bound = 10
    with live(tmp_path, fake_ollama, max_connections=bound, body_timeout_s=20) as (port, url, _):
        busy = [connect(port) for _ in range(bound)]
        try:
            for sock in busy:  # a request in progress: headers in, body awaited
                sock.sendall(_post_headers(100, expect=True))
                assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")
            with connect(port) as extra:
                extra.sendall(GET_HEALTHZ)
                data, closed_at = read_until_closed(extra, 5)
            assert closed_at is not None
            status, headers, body = parse(data)
            assert status == 503
            assert headers["retry-after"] == "5"
            assert body["error"]["code"] == "too_many_connections"
            assert body["error"]["retry_after_s"] == 5
            busy.pop().close()  # one request goes: its place is free again
            deadline = time.monotonic() + 5
            answered = None
            while answered != 200 and time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    answered = httpx.get(f"{url}/healthz", timeout=2).status_code
                time.sleep(0.05)
            assert answered == 200
        finally:
            for sock in busy:
                sock.close()


def test_keep_alive_connection_stays_open_past_the_header_timeout(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    with (
        live(tmp_path, fake_ollama, header_timeout_s=0.5, keep_alive_s=75) as (port, _, _),
        connect(port) as sock,
    ):
        sock.sendall(GET_HEALTHZ)
        assert read_response(sock)[0] == 200
        time.sleep(1.5)  # three header timeouts: keep-alive idle is not "slow headers"
        assert not is_closed(sock)
        sock.sendall(GET_HEALTHZ)
        assert read_response(sock)[0] == 200


def test_a_slow_next_request_on_a_keep_alive_connection_gets_408(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    with (
        live(tmp_path, fake_ollama, header_timeout_s=0.5, keep_alive_s=75) as (port, _, _),
        connect(port) as sock,
    ):
        sock.sendall(GET_HEALTHZ)
        assert read_response(sock)[0] == 200
        time.sleep(1.0)  # keep-alive idle: no header timeout yet
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next request starts, never ends
        data, closed_at = read_until_closed(sock, 5)
    assert closed_at is not None
    assert 0.5 <= closed_at <= 2.5
    status, _, body = parse(data)
    assert status == 408
    assert body["error"]["code"] == "header_timeout"


def test_keep_alive_connection_is_closed_after_a_short_keep_alive(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    with (
        live(tmp_path, fake_ollama, header_timeout_s=30, keep_alive_s=0.5) as (port, _, _),
        connect(port) as sock,
    ):
        sock.sendall(GET_HEALTHZ)
        assert read_response(sock)[0] == 200
        data, closed_at = read_until_closed(sock, 5)
    assert closed_at is not None
    assert 0.3 <= closed_at <= 2.5
    assert data == b""


def test_the_protocol_pickles_by_reference_for_spawned_workers() -> None:
    copied = pickle.loads(pickle.dumps(ProtectedH11Protocol))  # noqa: S301 - our own bytes
    assert copied is ProtectedH11Protocol


def _bounds_in_child(env: dict[str, str], preexec: Any = None) -> dict[str, int]:
    code = (
        "import json; from server.protection import current_bounds; b = current_bounds(); "
        "print(json.dumps({'max_connections': b.max_connections, 'open_files': b.open_files}))"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        preexec_fn=preexec,
    )
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_spawned_worker_finds_the_limits_configured_by_its_parent() -> None:
    env = {
        **os.environ,
        LIMITS_ENV: LimitsSettings(max_connections=123).model_dump_json(),
        "PYTHONPATH": str(ROOT),
    }
    assert _bounds_in_child(env)["max_connections"] == 123
    without = {k: v for k, v in env.items() if k != LIMITS_ENV}
    without["NUISANCES_LIMITS__MAX_CONNECTIONS"] = "77"
    assert _bounds_in_child(without)["max_connections"] == 77  # from the settings


def test_the_open_files_limit_is_raised_and_bounds_the_connections() -> None:
    import resource

    def low_limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 600))

    env = {k: v for k, v in os.environ.items() if k != LIMITS_ENV}
    env["PYTHONPATH"] = str(ROOT)
    bounds = _bounds_in_child(env, preexec=low_limits)
    assert bounds["open_files"] == 600  # soft raised to the hard limit
    assert bounds["max_connections"] == 600 - FD_RESERVE  # 1,000 would not fit
