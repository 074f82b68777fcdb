"""Connection-level protection: uvicorn's h11 protocol with a header timeout and a bound on
open connections, and the process's open-files limit raised to fit that bound.

- **Header timeout**: a connection must deliver a whole request line and headers within
  ``header_timeout_s`` of connecting, or of the first byte of its next request on a keep-alive
  connection; otherwise it is closed (after a ``408`` when some bytes of a request came in,
  silently when none did). A keep-alive connection with nothing to say is left to uvicorn's
  keep-alive timeout (``keep_alive_s``).
- **Bounded connections**: at ``max_connections`` open connections, a new one first evicts
  the connection idle for the longest (waiting for its headers, or keep-alive idle: no request
  in progress). When every connection is busy, the new one gets an immediate ``503`` with
  ``Retry-After`` and is closed. So an idle-connection flood costs at most ``max_connections``
  file handles and never keeps ``/healthz`` or a chat request out.
- **Open files**: ``configure`` raises the soft ``RLIMIT_NOFILE`` towards the hard limit and
  clamps ``max_connections`` below it, keeping ``FD_RESERVE`` handles for the database, the
  model server, the log and audit files; it logs what it chose, once.

Where the limits come from, per process: ``serving.uvicorn_options`` calls ``configure(limits)``
in the process that starts uvicorn. ``configure`` also exports the limits to the environment
(``LIMITS_ENV``), so a worker that uvicorn *spawns* (``workers=2``: a fresh interpreter that
imports this module by name, the protocol class being pickled by reference) finds the same
limits there on its first connection; with no such variable, the worker reads
``load_settings().limits``. Connection counts are kept per uvicorn server (its
``ServerState``), so each worker process bounds its own connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http
import logging
import os
import resource
import socket
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from server.settings import LimitsSettings, load_settings

__all__ = [
    "FD_RESERVE",
    "LIMITS_ENV",
    "RETRY_AFTER_S",
    "Bounds",
    "ProtectedH11Protocol",
    "configure",
    "current_bounds",
    "raise_open_files_limit",
]

log = logging.getLogger("nuisances.protection")

FD_RESERVE = 128  # handles kept for database, model server, logs, audit, listening sockets
NOFILE_TARGET = 65_536  # the soft limit is raised this far at most (or to the hard limit)
RETRY_AFTER_S = 5  # told to a connection refused because every connection is busy
REFUSED_LINGER_S = 1.0  # a refused connection is read (and dropped) this long, then closed
LIMITS_ENV = "_NUISANCES_SERVE_LIMITS"  # the limits, as JSON, for spawned workers


@dataclass(frozen=True)
class Bounds:
    """What this process enforces: the limits after clamping to the open-files limit."""

    max_connections: int
    header_timeout_s: float
    open_files: int  # soft RLIMIT_NOFILE after raising


_bounds: Bounds | None = None
_lock = threading.Lock()


def raise_open_files_limit(target: int = NOFILE_TARGET) -> int:
    """Raise the soft RLIMIT_NOFILE to ``min(hard, target)`` (never lower it); the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = target if hard == resource.RLIM_INFINITY else min(hard, target)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # not allowed here: keep what we have
            pass
    return target if soft == resource.RLIM_INFINITY else soft


def configure(limits: LimitsSettings) -> Bounds:
    """Set this process's bounds from ``limits`` (and export them for spawned workers)."""
    global _bounds
    open_files = raise_open_files_limit()
    ceiling = max(1, open_files - FD_RESERVE)
    bounds = Bounds(
        max_connections=min(limits.max_connections, ceiling),
        header_timeout_s=limits.header_timeout_s,
        open_files=open_files,
    )
    os.environ[LIMITS_ENV] = limits.model_dump_json()
    with _lock:
        changed = bounds != _bounds
        _bounds = bounds
    if changed:
        extra: dict[str, Any] = {"max_connections": bounds.max_connections}
        extra["open_files"] = open_files
        level = logging.INFO
        if bounds.max_connections < limits.max_connections:
            level, extra["reason"] = logging.WARNING, "clamped to the open-files limit"
        log.log(level, "connection limits", extra=extra)
    return bounds


def current_bounds() -> Bounds:
    """This process's bounds: configured, else from ``LIMITS_ENV``, else from the settings."""
    bounds = _bounds
    if bounds is not None:
        return bounds
    exported = os.environ.get(LIMITS_ENV)
    limits = LimitsSettings.model_validate_json(exported) if exported else load_settings().limits
    return configure(limits)


class _Registry:
    """One server's open connections, and the idle ones among them, longest idle first."""

    __slots__ = ("__weakref__", "idle", "open")

    def __init__(self) -> None:
        self.open: set[ProtectedH11Protocol] = set()
        self.idle: dict[ProtectedH11Protocol, None] = {}  # insertion order: idle since


_registries: weakref.WeakKeyDictionary[ServerState, _Registry] = weakref.WeakKeyDictionary()


def _registry(state: ServerState) -> _Registry:
    with _lock:
        registry = _registries.get(state)
        if registry is None:
            registry = _registries[state] = _Registry()
        return registry


@functools.cache
def _raw_response(status: int, code: str) -> bytes:
    """A whole HTTP/1.1 error response (the usual JSON error body) ending the connection."""
    from server.errors import error_response  # the app's module: imported on first use

    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    values: dict[str, Any] = {"retry_after_s": RETRY_AFTER_S} if status == 503 else {}
    response = error_response(status, code, headers=headers, **values)
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}".encode()]
    lines += [name + b": " + value for name, value in response.raw_headers]
    lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + bytes(response.body)


class ProtectedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus the header timeout and the connection bound."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._bounds = current_bounds()
        self._registry = _registry(server_state)
        self._timer: asyncio.TimerHandle | None = None  # header timeout, or refused linger
        self._request_started = False  # bytes of a request came in since the last request
        self._refused = False

    # States

    def _waiting_for_request(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _set_timer(self, delay: float, callback: Any) -> None:
        self._cancel_timer()
        self._timer = self.loop.call_later(delay, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _forget(self) -> None:
        self._cancel_timer()
        self._registry.open.discard(self)
        self._registry.idle.pop(self, None)

    def _client(self) -> str | None:
        return self.client[0] if self.client else None

    # Protocol interface

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        registry = self._registry
        evicted = 0
        while len(registry.open) >= self._bounds.max_connections and registry.idle:
            next(iter(registry.idle))._evict()
            evicted += 1
        if evicted:
            log.warning(
                "connection limit reached: idle connection closed", extra={"count": evicted}
            )
        if len(registry.open) >= self._bounds.max_connections:
            self._refuse()
            return
        registry.open.add(self)
        registry.idle[self] = None
        self._set_timer(self._bounds.header_timeout_s, self._header_timeout)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped: closing with unread data would reset the 503
        if self._waiting_for_request():
            if self._timer is None:  # keep-alive: the first byte of the next request
                self._set_timer(self._bounds.header_timeout_s, self._header_timeout)
            self._request_started = True
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request line and its headers came in: busy
            self._cancel_timer()
            self._request_started = False
            self._registry.idle.pop(self, None)

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._forget()  # the connection is the WebSocket protocol's from now on
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        if not self.transport.is_closing() and self in self._registry.open:
            self._registry.idle.pop(self, None)
            self._registry.idle[self] = None  # idle from now: the newest idle one
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        super().connection_lost(exc)

    # Closing

    def _evict(self) -> None:
        """Close this idle connection now, to make room for a new one."""
        self._forget()
        self._unset_keepalive_if_required()
        self.transport.abort()  # no write buffer to flush: the handle is freed at once

    def _header_timeout(self) -> None:
        self._timer = None
        if self.transport.is_closing() or not self._waiting_for_request():
            return
        if self._request_started:
            self.transport.write(_raw_response(408, "header_timeout"))
            log.warning(
                "request headers too slow: connection closed", extra={"client": self._client()}
            )
        self._forget()
        self._unset_keepalive_if_required()
        self.transport.close()

    def _refuse(self) -> None:
        """Every connection is busy: answer 503 at once, read and drop what the client sends
        for a moment (so that the answer reaches it), then close."""
        self._refused = True
        log.warning(
            "connection limit reached: connection refused", extra={"client": self._client()}
        )
        self.transport.write(_raw_response(503, "too_many_connections"))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._set_timer(REFUSED_LINGER_S, self.transport.abort)


def _no_delay(transport: asyncio.Transport) -> None:
    """Send small writes at once (TCP_NODELAY). asyncio sets it only on sockets it made from
    an address; the workers of ``serve --workers N`` serve a socket the supervisor made, and
    without it the card's frame waited for the client's delayed ACK: about 40 ms a request."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
