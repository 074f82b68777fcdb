"""HTTP side of the fake Ollama server: a threaded HTTP/1.1 server and its request handler.

Routes (as ``GenerateRoutes`` in ``server/routes.go``): ``GET|HEAD /``, ``GET|HEAD
/api/version``, ``GET|HEAD /api/tags``, ``GET /api/ps``, ``POST /api/show``, ``POST /api/chat``.
Other paths answer gin's ``404 page not found``, other methods ``405 method not allowed``.
"""

from __future__ import annotations

import contextlib
import json
import math
import select
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import urlsplit

from .ollama_behaviour import NOT_FOUND_SINGLE_QUOTES, Behaviour
from .ollama_state import OllamaState
from .ollama_wire import estimate_prompt_tokens as prompt_tokens
from .ollama_wire import final_metrics, go_json, go_time, parse_keep_alive

JSON = "application/json; charset=utf-8"
NDJSON = "application/x-ndjson"
POLL_SECONDS = 0.01
_ROUTES = {
    "/": ("GET", "HEAD"),
    "/api/version": ("GET", "HEAD"),
    "/api/tags": ("GET", "HEAD"),
    "/api/ps": ("GET",),
    "/api/show": ("POST",),
    "/api/chat": ("POST",),
}
_GO_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "bool"}
_MESSAGES = "ChatRequest.messages of type []api.Message"
Request = socket.socket | tuple[bytes, socket.socket]


class FakeHTTPServer(HTTPServer):
    """One daemon thread per connection; every live connection can be aborted on close."""

    def __init__(self, state: OllamaState, host: str = "127.0.0.1") -> None:
        self.state = state
        self._lock = threading.Lock()
        self._live: dict[socket.socket, threading.Thread] = {}
        super().__init__((host, 0), OllamaHandler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup (slow on an offline machine)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Request, client_address: Any) -> None:
        """Serve the connection in a tracked daemon thread."""
        assert isinstance(request, socket.socket)
        thread = threading.Thread(
            target=self._serve, args=(request, client_address), daemon=True, name="fake-ollama"
        )
        with self._lock:
            self._live[request] = thread
        thread.start()

    def _serve(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: S110 - a client vanishing mid-answer is part of the job
            pass
        finally:
            self.shutdown_request(request)
            with self._lock:
                self._live.pop(request, None)

    def abort_connections(self) -> None:
        """Shut every live connection down, which unblocks the threads serving them."""
        with self._lock:
            sockets = list(self._live)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def join_connections(self, timeout: float) -> None:
        """Wait (bounded) for the connection threads to finish."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._live.values())
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class OllamaHandler(BaseHTTPRequestHandler):
    """Answers one connection's requests like ``ollama serve`` would."""

    protocol_version = "HTTP/1.1"
    server: FakeHTTPServer
    _headers_sent = False
    _counted = False
    _generating = False

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read ``FakeOllama.requests`` instead of logs."""

    def send_response(self, code: int, message: str | None = None) -> None:
        """Status line and ``Date`` only: Go's ``net/http`` sends no ``Server`` header."""
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def do_GET(self) -> None:
        """Route a GET request."""
        self._route("GET")

    def do_HEAD(self) -> None:
        """Route a HEAD request."""
        self._route("HEAD")

    def do_POST(self) -> None:
        """Route a POST request."""
        self._route("POST")

    def do_PUT(self) -> None:
        """Route a PUT request (always 404 or 405)."""
        self._route("PUT")

    def do_DELETE(self) -> None:
        """Route a DELETE request (always 404 or 405)."""
        self._route("DELETE")

    # -- plumbing -----------------------------------------------------------------------------

    def _route(self, method: str) -> None:
        self._headers_sent = self._counted = False
        raw = self._read_body()
        path = urlsplit(self.path).path
        head = method == "HEAD"
        state = self.server.state
        if path not in _ROUTES:
            self._send(404, b"404 page not found", "text/plain", head=head)
        elif method not in _ROUTES[path]:
            self._send(405, b"405 method not allowed", "text/plain", head=head)
        elif path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8", head=head)
        elif path == "/api/version":
            self._send(200, go_json({"version": state.version}), JSON, head=head)
        elif path == "/api/tags":
            models = [card.tags_entry() for card in state.cards()]
            self._send(200, go_json({"models": models}), JSON, head=head)
        elif path == "/api/ps":
            running = [card.ps_entry(until) for card, until in state.running()]
            self._send(200, go_json({"models": running}), JSON)
        elif path == "/api/show":
            self._show(raw)
        else:
            self._chat(raw)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes, content_type: str, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._headers_sent = True
        if not head:
            self.wfile.write(body)

    def _error(self, status: int, message: str, content_type: str = JSON) -> None:
        self._send(status, go_json({"error": message}), content_type)

    def _parse(self, raw: bytes, go_type: str) -> dict[str, Any] | None:
        """Decode a JSON object body, or answer 400 with gin's message and return None."""
        if not raw.strip():
            self._error(400, "missing request body")
            return None
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            text = raw.decode("utf-8", "replace")
            found = text[exc.pos] if exc.pos < len(text) else ""
            reason = f"invalid character '{found}' looking for beginning of value"
            self._error(400, reason if found else "unexpected EOF")
            return None
        if not isinstance(body, dict):
            kind = _GO_KINDS.get(type(body), "null")
            self._error(400, f"json: cannot unmarshal {kind} into Go value of type {go_type}")
            return None
        return body

    # -- /api/show ----------------------------------------------------------------------------

    def _show(self, raw: bytes) -> None:
        body = self._parse(raw, "api.ShowRequest")
        if body is None:
            return
        name = body.get("model") or body.get("name")
        if not isinstance(name, str) or not name:
            self._error(400, "model is required")
            return
        card = self.server.state.find(name)
        if card is None:
            shown = name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"
            self._error(404, NOT_FOUND_SINGLE_QUOTES.replace("{model}", shown))
            return
        thinking = self.server.state.supports_thinking(name)
        self._send(200, go_json(card.show_body(thinking=thinking)), JSON)

    # -- /api/chat ----------------------------------------------------------------------------

    def _chat(self, raw: bytes) -> None:
        state = self.server.state
        body = self._parse(raw, "api.ChatRequest")
        if body is None:
            return
        state.record_request(body)
        model = body.get("model")
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            kind = _GO_KINDS.get(type(messages), "object")
            self._error(400, f"json: cannot unmarshal {kind} into Go struct field {_MESSAGES}")
            return
        if not isinstance(model, str) or not model:
            self._error(400, "model is required")
            return
        if state.find(model) is None:
            self._error(404, NOT_FOUND_SINGLE_QUOTES.replace("{model}", model))
            return
        try:
            keep_alive = parse_keep_alive(body.get("keep_alive"))
        except ValueError as exc:
            self._error(400, str(exc))
            return
        if not messages and body.get("keep_alive") is not None and keep_alive == 0:
            state.unload(model)
            self._send(200, go_json(self._object(model, "", done_reason="unload")), JSON)
            return
        think = body.get("think")
        if think not in (None, False, "") and not state.supports_thinking(model):
            self._error(400, f'"{model}" does not support thinking')
            return
        if not messages:
            state.mark_loaded(model, keep_alive)
            self._send(200, go_json(self._object(model, "", done_reason="load")), JSON)
            return
        self._generate(body, model, state.next_behaviour(), keep_alive)

    def _object(self, model: str, content: str, **final: Any) -> dict[str, Any]:
        """A ``ChatResponse``: a chunk, or with ``done_reason`` (and metrics) a final one."""
        message = {"role": "assistant", "content": content}
        chunk = {"model": model, "created_at": go_time(), "message": message, "done": bool(final)}
        return chunk | final

    def _generate(self, body: dict[str, Any], model: str, plan: Behaviour, keep_alive: int) -> None:
        if plan.status != 200:
            self._error(plan.status, plan.error.replace("{model}", model))
            return
        pieces, reason = plan.pieces(), plan.done_reason
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        cap = (options or {}).get("num_predict")
        if plan.end == "done" and type(cap) is int and 0 < cap < len(pieces):
            pieces, reason = pieces[:cap], "length"
        state = self.server.state
        cold = state.mark_loaded(model, keep_alive)
        # A slot is taken from here (first-byte delay included) until the model is done, just
        # before its last line goes out, or until the client is gone (or the fake closes):
        # FakeOllama.max_concurrent is the peak of such generations. Ending the count before
        # the last line, not after it, means a client that sends its next request as soon as
        # it reads ``done`` is never seen overlapping its previous generation.
        state.begin_generation()
        self._generating = True
        try:
            if plan.first_byte_delay and not self._wait(plan.first_byte_delay):
                return
            metrics = final_metrics(
                prompt_tokens=prompt_tokens(body.get("messages") or []),
                eval_count=len(pieces),
                cold=cold,
            )
            final = {"done_reason": reason, **metrics}
            if body.get("stream") is False:
                self._whole(plan, model, pieces, final)
            else:
                self._stream(plan, model, pieces, final)
        finally:
            self._finish_generation()

    def _finish_generation(self) -> None:
        """The generation under way is over (once per generation)."""
        if self._generating:
            self._generating = False
            self.server.state.end_generation()

    def _whole(self, plan: Behaviour, model: str, pieces: list[str], final: dict[str, Any]) -> None:
        """``"stream": false``: the same plan, answered as one object (or not at all).

        ``final`` holds the fields of a final chunk after ``done``: the reason and the metrics.
        """
        stall = plan.stall_seconds if plan.stall_after is not None else 0.0
        thinking_time = plan.delay * len(pieces) + stall
        if thinking_time and not self._wait(thinking_time):
            return
        if plan.end != "endless":
            self._finish_generation()
        if plan.end == "drop":
            self._abort()
        elif plan.end == "error_line":
            self._error(500, plan.error)
        elif plan.end == "endless":
            self._wait(math.inf)
        elif plan.end == "malformed":
            self._send(200, self._malformed_line(plan, model), JSON)
        else:
            self._send(200, go_json(self._object(model, "".join(pieces), **final)), JSON)

    def _stream(
        self, plan: Behaviour, model: str, pieces: list[str], final: dict[str, Any]
    ) -> None:
        """Stream NDJSON lines, one per HTTP chunk, then end as the plan says."""
        for index, piece in enumerate(pieces):
            if not self._pause(plan, index) or not self._line(self._object(model, piece)):
                return
        if not self._pause(plan, len(pieces)):
            return
        if plan.end != "endless":
            self._finish_generation()
        if plan.end == "drop":
            self._abort()
            return
        if plan.end == "endless":
            while self._line(self._object(model, plan.text)) and self._wait(plan.delay):
                pass
            return
        if plan.end == "error_line" and not self._headers_sent:
            self._error(500, plan.error, "application/json")
            return
        if plan.end == "error_line":
            last = go_json({"error": plan.error})
        elif plan.end == "malformed":
            last = self._malformed_line(plan, model)
        else:
            last = go_json(self._object(model, "", **final))
        if self._write_chunk(last + b"\n"):
            self._write_chunk(b"")

    def _malformed_line(self, plan: Behaviour, model: str) -> bytes:
        if plan.line:
            return plan.line.encode("utf-8")
        whole = go_json(self._object(model, "x"))
        return whole[: whole.index(b'"assist') + len(b'"assist')]

    def _pause(self, plan: Behaviour, index: int) -> bool:
        """Wait before line ``index``: the inter-chunk delay, plus the stall if it is here."""
        seconds = plan.delay if index else 0.0
        if plan.stall_after == index:
            seconds += plan.stall_seconds
        return seconds <= 0 or self._wait(seconds)

    def _line(self, obj: dict[str, Any]) -> bool:
        return self._write_chunk(go_json(obj) + b"\n")

    def _write_chunk(self, data: bytes) -> bool:
        """Send one HTTP chunk (``b""`` is the terminating one); headers go with the first."""
        try:
            if not self._headers_sent:
                self._headers_sent = True
                self.send_response(200)
                self.send_header("Content-Type", NDJSON)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
            self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
        except OSError:
            self._client_gone()
            return False
        return True

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` while watching the socket; False if the client left or we close."""
        deadline = time.monotonic() + seconds
        stopping = self.server.state.stopping
        while not stopping.is_set():
            if self._client_left():
                self._client_gone()
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            stopping.wait(min(remaining, POLL_SECONDS))
        self.close_connection = True
        return False

    def _client_left(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def _client_gone(self) -> None:
        self.close_connection = True
        if not self._counted and not self.server.state.stopping.is_set():
            self._counted = True
            self.server.state.record_disconnect()

    def _abort(self) -> None:
        """Close the TCP connection here and now (FIN), whatever was left unsaid."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
