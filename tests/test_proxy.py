"""The reverse proxy (deploy/nginx/nginx.conf), checked by a real nginx: its own syntax check
(``nginx -t``), then a live nginx between httpx and a real uvicorn, over TLS with a certificate
made by scripts/lan-cert.

The test configuration is the deployed file with only its paths changed: the certificate
folder, the upstream (``api:8000`` -> the test's uvicorn), the listening address, the pid file
and the temporary folders. Each replacement must find its text, and no deployment path may be
left, so the file checked is the file deployed.

nginx is Debian's (``apt-get install -y nginx``: /usr/sbin/nginx, often off a user's PATH) or any
nginx on PATH. Without one, the nginx cases are skipped, unless NUISANCES_TEST_REQUIRE_NGINX=1
(set by CI), which turns that into a failure. nginx runs as the current user, in the
foreground, in its own process group, stopped at teardown.

Several cases connect from their own loopback address (127.0.0.2...): nginx counts connections
and requests per client address, so a case that exhausts one address leaves the others alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from server.settings import Settings
from tests.live_server import serving

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "deploy" / "nginx" / "nginx.conf"
LAN_CERT = ROOT / "scripts" / "lan-cert"
BODY_LIMIT = 32_768  # Settings.body_max_bytes, and client_max_body_size 32k
EVENT_GAP_S = 0.5
EVENTS = 3
PER_ADDRESS_CONNECTIONS = 20
BURST = 40
RATE_PER_S = 20
SLOW_S = 1.5
START_TIMEOUT_S = 15.0


# --- nginx and its certificate -----------------------------------------------------------------


def _nginx_binary() -> str | None:
    """nginx on PATH, or in the sbin folders a user's PATH often lacks (Debian: /usr/sbin)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    return shutil.which("nginx", path=search)


@pytest.fixture(scope="module")
def nginx() -> str:
    binary = _nginx_binary()
    if binary is None:
        reason = "no nginx on PATH, /usr/sbin or /usr/local/sbin (apt-get install -y nginx)"
        if os.environ.get("NUISANCES_TEST_REQUIRE_NGINX") == "1":
            pytest.fail(reason + " (NUISANCES_TEST_REQUIRE_NGINX=1)")
        pytest.skip(reason)
    return binary


def _lan_cert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the project's own script, fixed arguments
        [str(LAN_CERT), *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as scripts/lan-cert leaves deploy/tls: server.crt, server.key, ca.crt."""
    folder = tmp_path_factory.mktemp("lan") / "tls"
    result = _lan_cert("--out", str(folder))
    assert result.returncode == 0, f"scripts/lan-cert failed:\n{result.stdout}{result.stderr}"
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _directives(text: str) -> str:
    """The configuration without its comment lines (they may name deployment paths)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def render_config(prefix: Path, tls: Path, *, upstream_port: int, listen_port: int) -> Path:
    """deploy/nginx/nginx.conf with its deployment paths pointed into ``prefix``."""
    text = CONFIG.read_text(encoding="utf-8")
    replacements = [
        ("ssl_certificate /etc/nginx/tls/", f"ssl_certificate {tls}/"),
        ("ssl_certificate_key /etc/nginx/tls/", f"ssl_certificate_key {tls}/"),
        (" /var/cache/nginx/", f" {prefix}/cache/"),
        ("pid /run/nginx.pid;", f"pid {prefix}/nginx.pid;"),
        ("server api:8000;", f"server 127.0.0.1:{upstream_port};"),
        ("listen 8443 ssl;", f"listen 127.0.0.1:{listen_port} ssl;"),
    ]
    for old, new in replacements:
        assert old in text, f"{CONFIG} no longer holds {old!r}: update the test's rewrite"
        text = text.replace(old, new)
    for deployed in ("/etc/nginx", "/var/cache/nginx", "/run/", "api:8000", "8443"):
        assert deployed not in _directives(text), f"{deployed} is left in the test's config"
    (prefix / "cache").mkdir(exist_ok=True)  # a tmpfs in the container
    conf = prefix / "nginx.conf"
    conf.write_text(text, encoding="utf-8")
    return conf


def _command(binary: str, prefix: Path, conf: Path, *extra: str) -> list[str]:
    # -e: the error log goes to stderr from the very start, before the configuration is read.
    return [binary, "-p", f"{prefix}/", "-c", str(conf), "-e", "stderr", *extra]


def test_the_body_limit_is_the_apis() -> None:
    """client_max_body_size is Settings.body_max_bytes: the api's 413, given at the edge."""
    [size] = re.findall(r"^\s*client_max_body_size\s+(\d+)k;", CONFIG.read_text("utf-8"), re.M)
    assert int(size) * 1024 == BODY_LIMIT == Settings.model_fields["body_max_bytes"].default


# --- the syntax check ------------------------------------------------------------------------


def test_nginx_accepts_the_config(nginx: str, tls: Path, tmp_path: Path) -> None:
    conf = render_config(tmp_path, tls, upstream_port=_free_port(), listen_port=_free_port())
    result = subprocess.run(  # noqa: S603 - nginx, our configuration
        _command(nginx, tmp_path, conf, "-t"),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 0, f"nginx -t refused {CONFIG}:\n{result.stderr}"
    assert "test is successful" in result.stderr
    # Not even a warning (a deprecated directive, a limit that cannot be applied...).
    assert "[warn]" not in result.stderr, result.stderr


def test_the_syntax_check_catches_a_broken_config(nginx: str, tls: Path, tmp_path: Path) -> None:
    """The check above can fail: one unknown directive and nginx says so."""
    conf = render_config(tmp_path, tls, upstream_port=_free_port(), listen_port=_free_port())
    conf.write_text(
        conf.read_text(encoding="utf-8").replace("keepalive 32;", "keepalive_connections 32;"),
        encoding="utf-8",
    )
    result = subprocess.run(  # noqa: S603 - nginx, our configuration
        _command(nginx, tmp_path, conf, "-t"),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode != 0
    assert 'unknown directive "keepalive_connections"' in result.stderr


# --- a tiny upstream: what the api would see ------------------------------------------------


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body_bytes: int


@dataclass
class Upstream:
    """What reached the app behind nginx, and when it sent each event of its stream."""

    seen: list[Seen] = field(default_factory=list)
    event_sent_at: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, request: Request, body: bytes = b"") -> None:
        entry = Seen(request.url.path, dict(request.headers), len(body))
        with self.lock:
            self.seen.append(entry)

    def paths(self) -> list[str]:
        with self.lock:
            return [entry.path for entry in self.seen]

    def last(self, path: str) -> Seen:
        with self.lock:
            return [entry for entry in self.seen if entry.path == path][-1]


def make_app(upstream: Upstream) -> FastAPI:
    app = FastAPI()

    @app.get("/healthz")
    @app.get("/readyz")
    async def health(request: Request) -> dict[str, str]:
        upstream.record(request)
        return {"status": "ok"}

    @app.get("/v1/ping")
    async def ping(request: Request) -> dict[str, str]:
        upstream.record(request)
        return {"pong": "ok"}

    @app.post("/v1/echo")
    async def echo(request: Request) -> dict[str, int]:
        body = await request.body()
        upstream.record(request, body)
        return {"bytes": len(body)}

    @app.get("/v1/slow")
    async def slow(request: Request) -> dict[str, str]:
        upstream.record(request)
        await asyncio.sleep(SLOW_S)
        return {"slow": "ok"}

    @app.get("/v1/events")
    async def events(request: Request) -> StreamingResponse:
        upstream.record(request)

        async def frames() -> AsyncIterator[bytes]:
            for number in range(EVENTS):
                if number:
                    await asyncio.sleep(EVENT_GAP_S)
                upstream.event_sent_at.append(time.monotonic())
                yield f"event: tick\ndata: {number}\n\n".encode()

        return StreamingResponse(frames(), media_type="text/event-stream")

    return app


# --- a live nginx ------------------------------------------------------------------------------


@dataclass
class Proxy:
    port: int
    ca: Path
    access_log: Path
    error_log: Path
    upstream: Upstream

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def client(self, address: str = "127.0.0.1", **options: Any) -> httpx.Client:
        """An HTTPS client that trusts only the generated CA, connecting from ``address``."""
        context = ssl.create_default_context(cafile=str(self.ca))
        transport = httpx.HTTPTransport(verify=context, local_address=address, **options)
        return httpx.Client(base_url=self.url, transport=transport, timeout=10)

    def access_entries(self) -> list[dict[str, Any]]:
        lines = self.access_log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """A fast shutdown (SIGTERM to the master); its whole process group if it hangs."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)  # the master stops its workers, then exits
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own group: the master and its workers
            process.wait(timeout=10)


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], errors: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nginx did not start:\n{errors.read_text(encoding='utf-8')}")


@contextlib.contextmanager
def running_nginx(
    binary: str, prefix: Path, tls: Path, upstream: Upstream, upstream_port: int
) -> Iterator[Proxy]:
    # Run as root (CI), the workers are nobody (the config has no `user`), who cannot write in
    # the test's folders: a request body spilled to disk would be a 500, so the body cases
    # also show that bodies stay in memory, as they must in the read-only container.
    prefix.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    conf = render_config(prefix, tls, upstream_port=upstream_port, listen_port=port)
    access_log, error_log = prefix / "stdout.log", prefix / "stderr.log"
    with access_log.open("wb") as out, error_log.open("wb") as err:
        process = subprocess.Popen(  # noqa: S603 - nginx, our configuration
            _command(binary, prefix, conf, "-g", "daemon off;"),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        _wait_until_listening(port, process, error_log)
        yield Proxy(port, tls / "ca.crt", access_log, error_log, upstream)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def proxy(nginx: str, tls: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    upstream = Upstream()
    with serving(make_app(upstream), log_level="warning") as app_url:
        app_port = urlsplit(app_url).port
        assert app_port is not None
        prefix = tmp_path_factory.mktemp("nginx")
        with running_nginx(nginx, prefix, tls, upstream, app_port) as running:
            yield running


# --- TLS ---------------------------------------------------------------------------------------


def test_health_answers_over_tls(proxy: Proxy) -> None:
    with proxy.client() as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.headers["server"] == "nginx", "server_tokens off: no version"
    assert response.headers["strict-transport-security"].startswith("max-age=")


def test_a_tls_1_2_only_client_gets_in(proxy: Proxy) -> None:
    """Older phones: TLS 1.2 with the P-256 certificate needs an ECDSA suite in ssl_ciphers."""
    context = ssl.create_default_context(cafile=str(proxy.ca))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        assert conn.version() == "TLSv1.2"
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 ")


def test_a_client_that_does_not_trust_the_ca_is_refused(proxy: Proxy) -> None:
    """The checks above verify the certificate: without the generated CA, no connection."""
    with (
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
        httpx.Client(verify=ssl.create_default_context(), timeout=10) as client,
    ):
        client.get(f"{proxy.url}/healthz")


def test_plain_http_on_the_tls_port_fails(proxy: Proxy) -> None:
    before = proxy.upstream.paths()
    response = httpx.get(f"http://127.0.0.1:{proxy.port}/healthz", timeout=10)
    assert response.status_code == 400
    assert "plain HTTP request was sent to HTTPS port" in response.text
    assert proxy.upstream.paths() == before, "a request in clear must never reach the api"


# --- streaming, sizes, headers, logs -----------------------------------------------------------


def test_events_arrive_as_the_api_sends_them(proxy: Proxy) -> None:
    """proxy_buffering off: the first event reaches the phone before the last is even sent."""
    arrived: list[float] = []
    names: list[str] = []
    with (
        proxy.client() as client,
        client.stream("GET", "/v1/events", headers={"Accept": "text/event-stream"}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                arrived.append(time.monotonic())
                names.append(line.removeprefix("event: "))
    sent = proxy.upstream.event_sent_at[-EVENTS:]
    assert names == ["tick"] * EVENTS
    assert arrived[-1] - arrived[0] >= 0.8 * EVENT_GAP_S, (arrived, sent)
    assert arrived[0] < sent[-1], "the first event waited for the last: the stream is buffered"


def _chunks(size: int) -> Iterator[bytes]:
    remaining = size
    while remaining:
        piece = min(remaining, 4096)
        remaining -= piece
        yield b"x" * piece


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_at_the_limit_reaches_the_api(proxy: Proxy, framing: str) -> None:
    body: bytes | Iterator[bytes] = (
        b"x" * BODY_LIMIT if framing == "content-length" else _chunks(BODY_LIMIT)
    )
    with proxy.client() as client:
        response = client.post("/v1/echo", content=body)
    assert response.status_code == 200
    assert response.json() == {"bytes": BODY_LIMIT}
    assert proxy.upstream.last("/v1/echo").body_bytes == BODY_LIMIT


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_gets_413_at_the_edge(proxy: Proxy, framing: str) -> None:
    before = proxy.upstream.paths().count("/v1/echo")
    body: bytes | Iterator[bytes] = (
        b"x" * (BODY_LIMIT + 1) if framing == "content-length" else _chunks(BODY_LIMIT + 1)
    )
    with proxy.client() as client:
        response = client.post("/v1/echo", content=body)
    assert response.status_code == 413
    error = response.json()["error"]  # the api's own error shape
    assert error["code"] == "body_too_large"
    assert str(BODY_LIMIT) in error["message_fr"]
    assert proxy.upstream.paths().count("/v1/echo") == before, "the api never saw it"


def test_the_api_learns_the_client_address_and_scheme(proxy: Proxy) -> None:
    """X-Forwarded-For is the address nginx saw, whatever the client claims."""
    headers = {"X-Forwarded-For": "203.0.113.7", "X-Request-ID": "phone-request-1"}
    with proxy.client(address="127.0.0.5") as client:
        assert client.get("/v1/ping", headers=headers).status_code == 200
        assert client.get("/v1/ping").status_code == 200
    given, generated = [entry for entry in proxy.upstream.seen if entry.path == "/v1/ping"][-2:]
    assert given.headers["x-forwarded-for"] == "127.0.0.5"
    assert given.headers["x-forwarded-proto"] == "https"
    assert given.headers["x-request-id"] == "phone-request-1", "the client's id passes through"
    assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["x-request-id"]), "else nginx's own"
    assert "connection" not in generated.headers, "no `Connection: close`: kept alive"


def test_the_access_log_is_json_without_query_or_token(proxy: Proxy) -> None:
    secret = "nui_do_not_log_me"  # noqa: S105 - a made-up token, for the log to leave out
    with proxy.client() as client:
        response = client.get(
            f"/v1/ping?token={secret}",
            headers={"Authorization": f"Bearer {secret}", "X-Request-ID": "log-check-1"},
        )
    assert response.status_code == 200
    entries: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        entries = [e for e in proxy.access_entries() if e.get("request_id") == "log-check-1"]
        if entries:
            break
        time.sleep(0.05)
    assert len(entries) == 1, proxy.access_log.read_text(encoding="utf-8")
    entry = entries[0]
    assert set(entry) == {
        "time",
        "method",
        "uri",
        "status",
        "request_time",
        "remote_addr",
        "request_id",
    }
    assert (entry["method"], entry["uri"], entry["status"]) == ("GET", "/v1/ping", 200)
    assert entry["remote_addr"] == "127.0.0.1"
    assert isinstance(entry["request_time"], float)
    assert secret not in proxy.access_log.read_text(encoding="utf-8")


# --- limits ------------------------------------------------------------------------------------


def test_requests_per_address_are_limited_on_v1(proxy: Proxy) -> None:
    """A burst of 40 is served at once (nodelay), then 20 per second; the rest gets a JSON 429."""
    statuses: list[int] = []
    refused: httpx.Response | None = None
    started = time.monotonic()
    with proxy.client(address="127.0.0.2") as client:
        while refused is None and len(statuses) < 1000:
            response = client.get("/v1/ping")
            statuses.append(response.status_code)
            if response.status_code != 200:
                refused = response
    elapsed = time.monotonic() - started
    assert refused is not None, "no request was ever refused"
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert "112" in refused.json()["error"]["message_fr"]
    served = len(statuses) - 1
    assert served >= BURST, f"only {served} served before a 429: the burst is {BURST}"
    assert served <= BURST + 2 + RATE_PER_S * elapsed, f"{served} served in {elapsed:.2f} s"
    with proxy.client(address="127.0.0.1") as other:
        assert other.get("/v1/ping").status_code == 200, "another address is not limited"


def test_health_probes_are_not_rate_limited(proxy: Proxy) -> None:
    with proxy.client(address="127.0.0.4") as client:
        statuses = Counter(
            client.get("/healthz" if n % 2 else "/readyz").status_code for n in range(150)
        )
    assert statuses == Counter({200: 150})


def test_connections_per_address_are_limited(proxy: Proxy) -> None:
    """Beyond 20 requests in flight from one address, the next ones get a 429 at once."""
    extra = 5
    wanted = PER_ADDRESS_CONNECTIONS + extra
    limits = httpx.Limits(max_connections=wanted, max_keepalive_connections=wanted)
    barrier = threading.Barrier(wanted)
    with proxy.client(address="127.0.0.3", limits=limits) as client:

        def one(_: int) -> int:
            barrier.wait(timeout=10)
            return client.get("/v1/slow").status_code

        with ThreadPoolExecutor(max_workers=wanted) as pool:
            statuses = Counter(pool.map(one, range(wanted)))
    assert statuses == Counter({200: PER_ADDRESS_CONNECTIONS, 429: extra})


def test_an_api_that_is_down_gets_a_json_error_at_once(
    nginx: str, tls: Path, tmp_path: Path
) -> None:
    closed = _free_port()  # nothing listens there
    with running_nginx(nginx, tmp_path, tls, Upstream(), closed) as down, down.client() as client:
        started = time.monotonic()
        response = client.get("/v1/ping")
        elapsed = time.monotonic() - started
    assert response.status_code == 502
    assert response.headers["retry-after"] == "5"
    error = response.json()["error"]
    assert error["code"] == "service_unavailable"
    assert error["message_fr"].endswith("Si quelqu'un est en danger maintenant, appelez le 112.")
    assert elapsed < 2.0, "connection refused: no wait for proxy_connect_timeout"


# --- scripts/lan-cert --------------------------------------------------------------------------


def _certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_lan_cert_issues_a_server_certificate_for_the_given_names(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    result = _lan_cert("--out", str(out), "pc-llm.lan", "192.168.1.20")
    assert result.returncode == 0, result.stderr
    assert {p.name for p in out.iterdir()} == {"server.crt", "server.key", "ca.crt"}
    assert (out / "server.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "lan-ca" / "ca.key").stat().st_mode & 0o777 == 0o600
    ca, server = _certificate(out / "ca.crt"), _certificate(out / "server.crt")
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["pc-llm.lan"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["192.168.1.20"]
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert server.not_valid_after_utc - server.not_valid_before_utc == dt.timedelta(days=825)
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == dt.timedelta(days=3650)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server.verify_directly_issued_by(ca)
    assert "ca.crt" in result.stdout, "it says what to install on the phones"


def test_lan_cert_defaults_to_localhost(tmp_path: Path) -> None:
    assert _lan_cert("--out", str(tmp_path / "tls")).returncode == 0
    server = _certificate(tmp_path / "tls" / "server.crt")
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_lan_cert_reuses_its_ca_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    assert _lan_cert("--out", str(out)).returncode == 0
    first_ca, first_server = (out / "ca.crt").read_bytes(), (out / "server.crt").read_bytes()
    again = _lan_cert("--out", str(out), "pc-llm.lan")
    assert again.returncode == 0, again.stderr
    assert (out / "ca.crt").read_bytes() == first_ca, "the phones keep trusting the same CA"
    assert (out / "server.crt").read_bytes() != first_server
    _certificate(out / "server.crt").verify_directly_issued_by(_certificate(out / "ca.crt"))
    forced = _lan_cert("--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "ca.crt").read_bytes() != first_ca
    _certificate(out / "server.crt").verify_directly_issued_by(_certificate(out / "ca.crt"))


def test_lan_cert_refuses_half_a_ca(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    assert _lan_cert("--out", str(out)).returncode == 0
    (tmp_path / "lan-ca" / "ca.key").unlink()
    result = _lan_cert("--out", str(out))
    assert result.returncode == 1
    assert "half a CA" in result.stderr
