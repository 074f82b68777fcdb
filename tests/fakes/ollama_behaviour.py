"""Scripted behaviours of the fake Ollama server, one per ``/api/chat`` generation request.

Build them with the classmethods; each documents the exact wire output. In the streamed lines
below, ``<chunk>`` stands for ``{"model":M,"created_at":T,"message":{"role":"assistant",
"content":PIECE},"done":false}`` and ``<final>`` for the same with ``"content":""``,
``"done":true,"done_reason":R`` and the metrics of :func:`ollama_wire.final_metrics`.

Like Go's ``http.Flusher`` under gin's ``c.Stream``, the status line and headers of a stream go
out with its first line, never before: a delay before the first line delays the headers too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

End = Literal["done", "drop", "error_line", "malformed", "endless"]
NotFoundSpelling = Literal["single_quotes", "double_quotes", "legacy"]

#: ``server/routes.go`` (>= v0.3.11, ChatHandler/ShowHandler, model absent from disk).
NOT_FOUND_SINGLE_QUOTES = "model '{model}' not found"
#: ``server/routes.go`` ``handleScheduleError`` (v0.3.0 and later; the only spelling of the
#: chat handler from v0.3.0 to v0.3.10): Go's ``%q``.
NOT_FOUND_DOUBLE_QUOTES = 'model "{model}" not found, try pulling it first'
#: ``server/routes.go`` ChatHandler up to v0.2.x.
NOT_FOUND_LEGACY = "model '{model}' not found, try pulling it first"
#: ``server/sched.go`` ``ErrMaxQueue`` (since v0.1.33), sent with 503 (two spaces, sic).
BUSY_MESSAGE = "server busy, please try again.  maximum pending requests exceeded"
#: What ollama.com sends back through a local Ollama for a cloud model over its quota.
RATE_LIMITED_MESSAGE = "you've reached your hourly usage limit, please wait or upgrade to continue"
#: A runner crash as reported by Ollama (500).
SERVER_ERROR_MESSAGE = "llama runner process has terminated: exit status 2"
#: ``llm/llama_server.go``: the runner died during a completion (mid-stream ``{"error"}``).
MID_STREAM_ERROR_MESSAGE = "an error was encountered while running the model: unexpected EOF"

DEFAULT_TEXT = "Bonjour, je note votre message. Pouvez-vous préciser les dates et les heures ?"


@dataclass(frozen=True)
class Behaviour:
    """How the fake answers one ``/api/chat`` request that has messages.

    ``status`` other than 200 short-circuits everything: the answer is that status with the
    body ``{"error": error}`` (``{model}`` in ``error`` becomes the requested model name).
    Otherwise ``text`` is cut into ``chunk_size``-character pieces (one piece = one token),
    sent ``delay`` seconds apart after ``first_byte_delay``; after ``stall_after`` pieces the
    stream pauses ``stall_seconds``; after ``end_after`` pieces (all when ``None``) the stream
    ends as ``end`` says. Every wait is interrupted by the client leaving (counted in
    ``FakeOllama.disconnects``) or by ``FakeOllama.close()``.
    """

    text: str = DEFAULT_TEXT
    chunk_size: int = 4
    delay: float = 0.0
    first_byte_delay: float = 0.0
    stall_after: int | None = None
    stall_seconds: float = 0.0
    end: End = "done"
    end_after: int | None = None
    done_reason: str = "stop"
    status: int = 200
    error: str = ""
    line: str = ""

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if min(self.delay, self.first_byte_delay, self.stall_seconds) < 0:
            raise ValueError("delays must not be negative")

    def pieces(self) -> list[str]:
        """The content pieces before the ending (at most ``end_after`` of them)."""
        size = self.chunk_size
        pieces = [self.text[i : i + size] for i in range(0, len(self.text), size)]
        return pieces if self.end_after is None else pieces[: self.end_after]

    # -- successful streams -------------------------------------------------------------------

    @classmethod
    def normal(cls, text: str = DEFAULT_TEXT, chunk_size: int = 4, delay: float = 0.0) -> Behaviour:
        """200, ``application/x-ndjson``, chunked: ``<chunk>``×N then ``<final>`` (``"stop"``).

        With ``"stream": false``: one ``application/json; charset=utf-8`` object, ``<final>``
        carrying the whole text. ``options.num_predict`` below N cuts the reply to that many
        pieces and turns the reason into ``"length"``, as the real server does.
        """
        return cls(text=text, chunk_size=chunk_size, delay=delay)

    @classmethod
    def length(cls, text: str = DEFAULT_TEXT, chunk_size: int = 4) -> Behaviour:
        """As :meth:`normal`, but ``<final>`` says ``"done_reason":"length"`` (token cap hit)."""
        return cls(text=text, chunk_size=chunk_size, done_reason="length")

    @classmethod
    def slow_first_byte(cls, seconds: float, text: str = DEFAULT_TEXT) -> Behaviour:
        """As :meth:`normal`, but nothing at all (not even headers) for ``seconds`` first.

        Models a cold load or a long prompt evaluation. A client leaving meanwhile is counted.
        """
        return cls(text=text, first_byte_delay=seconds)

    @classmethod
    def stall(cls, after_chunks: int, seconds: float, text: str = DEFAULT_TEXT) -> Behaviour:
        """``<chunk>``×after_chunks, then silence for ``seconds``, then the rest and ``<final>``.

        While silent the server polls its socket, so a client that gives up (idle timeout) is
        seen and counted as a disconnect. ``after_chunks=0`` is a slow first byte.
        """
        return cls(text=text, stall_after=after_chunks, stall_seconds=seconds)

    @classmethod
    def endless(cls, chunk: str = "bla ", delay: float = 0.01) -> Behaviour:
        """``<chunk>`` with ``chunk`` every ``delay`` seconds, forever: never ``done``.

        Ends only when the client disconnects (counted) or the fake is closed.
        """
        return cls(text=chunk, chunk_size=max(len(chunk), 1), delay=delay, end="endless")

    # -- broken streams -----------------------------------------------------------------------

    @classmethod
    def drop(cls, after_chunks: int = 2, text: str = DEFAULT_TEXT) -> Behaviour:
        """``<chunk>``×after_chunks, then the TCP connection is closed (FIN).

        No ``<final>``, no terminating zero-length chunk: httpx raises ``RemoteProtocolError``.
        ``after_chunks=0`` (or ``"stream": false``) closes before any status line.
        """
        return cls(text=text, end="drop", end_after=after_chunks)

    @classmethod
    def error_line(
        cls,
        after_chunks: int = 2,
        message: str = MID_STREAM_ERROR_MESSAGE,
        text: str = DEFAULT_TEXT,
    ) -> Behaviour:
        """Status 200, ``<chunk>``×after_chunks, then ``{"error":message}`` and a clean end.

        Faithful to ``streamResponse``: with ``after_chunks=0`` nothing was written yet, so
        the answer is instead 500 ``{"error":message}`` (``application/json``); with
        ``"stream": false`` it is 500 ``{"error":message}`` too.
        """
        return cls(text=text, end="error_line", end_after=after_chunks, error=message)

    @classmethod
    def malformed(
        cls, after_chunks: int = 1, line: str = "", text: str = DEFAULT_TEXT
    ) -> Behaviour:
        """``<chunk>``×after_chunks, then ``line`` (not JSON), then a clean end without ``done``.

        The default line is a JSON object cut in the middle:
        ``{"model":M,"created_at":T,"message":{"role":"assist``.
        """
        return cls(text=text, end="malformed", end_after=after_chunks, line=line)

    # -- refusals (no stream at all) ----------------------------------------------------------

    @classmethod
    def not_found(cls, spelling: NotFoundSpelling = "single_quotes") -> Behaviour:
        """404 ``{"error": ...}`` as Ollama versions spell it for a model it does not have.

        - ``"single_quotes"``: ``model 'M' not found`` (current versions, >= 0.3.11);
        - ``"double_quotes"``: ``model "M" not found, try pulling it first`` (scheduler path,
          the chat handler's only spelling in 0.3.0–0.3.10);
        - ``"legacy"``: ``model 'M' not found, try pulling it first`` (<= 0.2.x).
        """
        message = {
            "single_quotes": NOT_FOUND_SINGLE_QUOTES,
            "double_quotes": NOT_FOUND_DOUBLE_QUOTES,
            "legacy": NOT_FOUND_LEGACY,
        }[spelling]
        return cls(status=404, error=message)

    @classmethod
    def busy(cls) -> Behaviour:
        """503 ``{"error":"server busy, please try again.  maximum pending requests exceeded"}``."""
        return cls(status=503, error=BUSY_MESSAGE)

    @classmethod
    def rate_limited(cls, message: str = RATE_LIMITED_MESSAGE) -> Behaviour:
        """429 ``{"error":message}`` (what a cloud model's quota produces through Ollama)."""
        return cls(status=429, error=message)

    @classmethod
    def server_error(cls, message: str = SERVER_ERROR_MESSAGE) -> Behaviour:
        """500 ``{"error":message}``."""
        return cls(status=500, error=message)

    @classmethod
    def bad_request(cls, message: str = "model is required") -> Behaviour:
        """400 ``{"error":message}``."""
        return cls(status=400, error=message)
