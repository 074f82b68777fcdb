"""A protocol-faithful fake OpenAI-compatible server (``/v1/chat/completions`` over SSE).

    with FakeOpenAI(models=["smollm2"]) as fake:
        fake.enqueue(Reply.normal("Bonjour, notez les dates.", chunk_size=4))
        ...  # point the code under test at fake.url (with or without "/v1")
        assert fake.requests[0]["max_tokens"] == 32

Each ``POST /v1/chat/completions`` for a served model (streamed or not) takes the next enqueued
:class:`Reply` (the default one when the script is empty). The wire follows llama.cpp's and
OpenAI's servers: chunked ``text/event-stream``, a role-only first delta, a ``: ping`` comment,
one ``data:`` event per piece, a final chunk with ``finish_reason`` (and llama.cpp's ``timings``
when asked), a usage chunk with empty ``choices`` when ``stream_options.include_usage`` is set,
then ``data: [DONE]``.
Errors are ``{"error": {"message", "type", "code"}}`` bodies, as OpenAI sends them.

``api_key`` makes every request need ``Authorization: Bearer <key>`` (else 401), a model not in
``models`` gets 404 ``model_not_found``, and ``json_schema=False`` refuses ``response_format``
``{"type": "json_schema"}`` with llama-cpp-python's 500 validation error. Threads are daemons;
every wait watches for the client leaving (counted in :attr:`FakeOpenAI.disconnects`) and for
:meth:`FakeOpenAI.close`, which shuts live connections down so that no test hangs on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import select
import socket
import socketserver
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.fakes.lifecycle import ClosedOnExit

End = Literal["done", "drop", "truncated", "error_event", "malformed", "endless"]
DEFAULT_TEXT = "Bonjour, je note votre message. Pouvez-vous préciser les dates ?"
#: Error bodies of real servers, by status (OpenAI's, llama.cpp's 503 while loading).
ERRORS: dict[int, dict[str, Any]] = {
    401: {"message": "Incorrect API key provided.", "type": "invalid_request_error",
          "code": "invalid_api_key"},
    404: {"message": "The model `{model}` does not exist or you do not have access to it.",
          "type": "invalid_request_error", "code": "model_not_found"},
    429: {"message": "Rate limit reached for requests.", "type": "requests",
          "code": "rate_limit_exceeded"},
    500: {"message": "The server had an error while processing your request.",
          "type": "server_error", "code": None},
    503: {"message": "Loading model", "type": "unavailable_error", "code": 503},
}  # fmt: skip
JSON_SCHEMA_REFUSED = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


@dataclass(frozen=True)
class Reply:
    """One answer: ``text`` in ``chunk_size`` pieces, ``delay`` apart, then ``end``.

    ``status`` other than 200 answers that status with ``ERRORS[status]`` instead. ``end_after``
    cuts the pieces before the ending (``drop``, ``error_event`` and ``malformed`` use it);
    ``stall_after`` pauses ``stall_seconds`` before that piece.
    """

    text: str = DEFAULT_TEXT
    chunk_size: int = 4
    delay: float = 0.0
    end: End = "done"
    end_after: int | None = None
    stall_after: int | None = None
    stall_seconds: float = 0.0
    finish_reason: str = "stop"
    status: int = 200
    line: str = 'data: {"choices": [{"delta": {"content": "x"'
    timings: bool = False  # llama.cpp's "timings" object in the final chunk
    crlf: bool = False  # sse-starlette ends lines with CRLF

    @classmethod
    def normal(cls, text: str = DEFAULT_TEXT, chunk_size: int = 4, **kw: Any) -> Reply:
        return cls(text=text, chunk_size=chunk_size, **kw)

    @classmethod
    def http_error(cls, status: int) -> Reply:
        return cls(status=status)

    @classmethod
    def error_event(cls, after: int = 2) -> Reply:
        return cls(end="error_event", end_after=after)

    @classmethod
    def malformed(cls, after: int = 2, line: str | None = None) -> Reply:
        return cls(end="malformed", end_after=after, line=line or cls.line)

    @classmethod
    def drop(cls, after: int = 2) -> Reply:
        """The TCP connection closes mid-body (no last HTTP chunk)."""
        return cls(end="drop", end_after=after)

    @classmethod
    def truncated(cls, after: int = 2) -> Reply:
        """The body ends cleanly (last HTTP chunk) with neither ``finish_reason`` nor [DONE]."""
        return cls(end="truncated", end_after=after)

    @classmethod
    def stall(cls, after: int = 1, seconds: float = 30.0) -> Reply:
        return cls(stall_after=after, stall_seconds=seconds)

    @classmethod
    def endless(cls, delay: float = 0.01) -> Reply:
        return cls(text="bla ", chunk_size=4, delay=delay, end="endless")

    def pieces(self, max_tokens: Any = None) -> tuple[list[str], str]:
        size, text = self.chunk_size, self.text
        pieces = [text[i : i + size] for i in range(0, len(text), size)][: self.end_after]
        if type(max_tokens) is int and 0 < max_tokens < len(pieces):
            return pieces[:max_tokens], "length"
        return pieces, self.finish_reason


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        self.live: set[socket.socket] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup (slow on an offline machine)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self.fake.lock:
            self.live.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.fake.lock:
                self.live.discard(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``FakeOpenAI.requests``."""

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        fake, path = self.server.fake, self.path.split("?")[0].rstrip("/")
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fake.record_authorization(self.headers.get("Authorization"))
        if (method, path) not in (("GET", "/v1/models"), ("POST", "/v1/chat/completions")):
            self._json(404, {"detail": "Not Found"})
        elif fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._json(401, {"error": ERRORS[401]})
        elif path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "me"} for m in fake.models]
            self._json(200, {"object": "list", "data": data})
        else:
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, {"error": {"message": "invalid JSON body", "type": "bad_request"}})
                return
            self._chat(body)

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        fake.record_request(body)
        model, fmt = body.get("model"), body.get("response_format") or {}
        if model not in fake.models:
            error = ERRORS[404] | {"message": ERRORS[404]["message"].format(model=model)}
            self._json(404, {"error": error})
            return
        if fmt.get("type") == "json_schema" and not fake.json_schema:
            self._json(500, {"error": {"message": JSON_SCHEMA_REFUSED, "type": "server_error"}})
            return
        reply = fake.next_reply()
        if reply.status != 200:
            self._json(reply.status, {"error": ERRORS[reply.status]})
        elif body.get("stream"):
            self._stream(reply, body)
        else:
            pieces, reason = reply.pieces(body.get("max_tokens"))
            message = {"role": "assistant", "content": "".join(pieces)}
            choice = {"index": 0, "message": message, "finish_reason": reason}
            self._json(200, self._object(body, [choice], usage=len(pieces)))

    def _object(self, body: dict[str, Any], choices: list[Any], **extra: Any) -> dict[str, Any]:
        obj = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1796000000}
        if "usage" in extra:
            tokens = extra.pop("usage")
            extra["usage"] = {"prompt_tokens": 12, "completion_tokens": tokens,
                              "total_tokens": 12 + tokens}  # fmt: skip
        return obj | {"model": body.get("model"), "choices": choices} | extra

    def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
        pieces, reason = reply.pieces(body.get("max_tokens"))
        nl = "\r\n" if reply.crlf else "\n"

        def event(obj: dict[str, Any] | str) -> bool:
            data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
            return self._chunk(f"data: {data}{nl}{nl}".encode())

        def delta(content: dict[str, str], finish: str | None = None, **extra: Any) -> bool:
            choice = {"index": 0, "delta": content, "finish_reason": finish}
            return event(self._object(body, [choice], **extra))

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not (delta({"role": "assistant"}) and self._chunk(f": ping{nl}{nl}".encode())):
            return
        for index, piece in enumerate(pieces):
            pause = (reply.delay if index else 0.0) + (
                reply.stall_seconds if reply.stall_after == index else 0.0
            )
            if not self._wait(pause) or not delta({"content": piece}):
                return
        if reply.end == "endless":
            while self._wait(reply.delay) and delta({"content": reply.text}):
                pass
            return
        if reply.end == "drop":
            self._abort()
            return
        if reply.end == "error_event":
            event({"error": ERRORS[500] | {"message": "llama_decode failed"}})
        elif reply.end == "malformed":
            self._chunk(f"{reply.line}{nl}{nl}".encode())
        elif reply.end == "done":
            timings = {"prompt_n": 12, "prompt_ms": 30.5, "predicted_n": len(pieces),
                       "predicted_ms": 20.0 * len(pieces)}  # fmt: skip
            delta({}, reason, **({"timings": timings} if reply.timings else {}))
            if (body.get("stream_options") or {}).get("include_usage"):
                event(self._object(body, [], usage=len(pieces)))
            event("[DONE]")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> bool:
        """One HTTP chunk (``b""`` ends the body); False when the client has gone."""
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except OSError:
            self._gone()
            return False
        return True

    def _wait(self, seconds: float) -> bool:
        """Sleep while watching the socket: False if the client left or the fake closes."""
        deadline = time.monotonic() + seconds
        while not self.server.fake.stopping.is_set():
            with contextlib.suppress(BlockingIOError):
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                    self._gone()
                    return False
            if time.monotonic() >= deadline:
                return True
            self.server.fake.stopping.wait(min(0.01, max(0.0, deadline - time.monotonic())))
        self.close_connection = True
        return False

    def _gone(self) -> None:
        self.close_connection = True
        if not self.server.fake.stopping.is_set():
            self.server.fake.record_disconnect()

    def _abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class FakeOpenAI(ClosedOnExit):
    """A fake OpenAI-compatible server on ``127.0.0.1``, started on construction."""

    def __init__(
        self,
        models: tuple[str, ...] | list[str] = ("smollm2",),
        *,
        api_key: str | None = None,
        json_schema: bool = True,
        default: Reply | None = None,
    ) -> None:
        self.models, self.api_key, self.json_schema = list(models), api_key, json_schema
        self.default = default or Reply.normal()
        self.lock, self.stopping = threading.Lock(), threading.Event()
        self._queue: deque[Reply] = deque()
        self._requests: list[dict[str, Any]] = []
        self._authorizations: list[str | None] = []
        self._disconnects = 0
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        """Stop serving and shut live connections down; idempotent."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            live = list(self._server.live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=2.0)

    def enqueue(self, *replies: Reply) -> None:
        """Script the next chat completions, one reply each, in order."""
        with self.lock:
            self._queue.extend(replies)

    def next_reply(self) -> Reply:
        with self.lock:
            return self._queue.popleft() if self._queue else self.default

    def record_request(self, body: dict[str, Any]) -> None:
        with self.lock:
            self._requests.append(copy.deepcopy(body))

    def record_authorization(self, value: str | None) -> None:
        with self.lock:
            self._authorizations.append(value)

    def record_disconnect(self) -> None:
        with self.lock:
            self._disconnects += 1

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copies of the ``/v1/chat/completions`` bodies received, oldest first."""
        with self.lock:
            return copy.deepcopy(self._requests)

    @property
    def authorizations(self) -> list[str | None]:
        """The ``Authorization`` header of every request (None when absent), oldest first."""
        with self.lock:
            return list(self._authorizations)

    @property
    def disconnects(self) -> int:
        """Clients that left before their answer was complete."""
        with self.lock:
            return self._disconnects

    async def wait_for_disconnect(self, within: float = 5.0, count: int = 1) -> bool:
        """Poll (without blocking the event loop) until ``count`` disconnects; False on timeout."""
        deadline = time.monotonic() + within
        while self.disconnects < count:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True
