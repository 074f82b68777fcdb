"""Shared, thread-safe state of one fake Ollama server: models, loads, script, observations."""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from .ollama_behaviour import Behaviour
from .ollama_wire import DEFAULT_KEEP_ALIVE_NS, ModelCard, normalise_model_name


class OllamaState:
    """Everything the HTTP handler threads and the test thread share, behind one lock."""

    def __init__(
        self,
        models: Iterable[str],
        *,
        loaded: bool,
        thinking: Iterable[str],
        default: Behaviour,
        version: str,
    ) -> None:
        self.version = version
        self.default = default
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._cards = {normalise_model_name(name): ModelCard.for_name(name) for name in models}
        self._thinking = {normalise_model_name(name) for name in thinking}
        self._expires: dict[str, int] = {}
        self._queue: deque[Behaviour] = deque()
        self._requests: list[dict[str, Any]] = []
        self._disconnects = 0
        self._generating = 0
        self._max_generating = 0
        if loaded:
            for key in self._cards:
                self._expires[key] = time.time_ns() + DEFAULT_KEEP_ALIVE_NS

    # -- models -------------------------------------------------------------------------------

    def find(self, name: str) -> ModelCard | None:
        """The installed model called ``name`` (tag defaults to ``latest``, any case)."""
        return self._cards.get(normalise_model_name(name))

    def cards(self) -> list[ModelCard]:
        """Installed models, in configuration order."""
        return list(self._cards.values())

    def supports_thinking(self, name: str) -> bool:
        """Whether ``name`` was configured as a thinking model."""
        return normalise_model_name(name) in self._thinking

    def mark_loaded(self, name: str, keep_alive_ns: int) -> bool:
        """Load ``name`` (or refresh its expiry); return True when it was not loaded before."""
        key = normalise_model_name(name)
        now = time.time_ns()
        with self._lock:
            cold = self._expires.get(key, 0) <= now
            self._expires[key] = now + keep_alive_ns
        return cold

    def unload(self, name: str | None = None) -> None:
        """Unload ``name``, or every model when ``name`` is None."""
        with self._lock:
            if name is None:
                self._expires.clear()
            else:
                self._expires.pop(normalise_model_name(name), None)

    def running(self) -> list[tuple[ModelCard, int]]:
        """Loaded models and their expiry (ns since the epoch), longest-lived first."""
        now = time.time_ns()
        with self._lock:
            alive = [
                (self._cards[key], until) for key, until in self._expires.items() if until > now
            ]
        return sorted(alive, key=lambda pair: -pair[1])

    # -- script -------------------------------------------------------------------------------

    def enqueue(self, behaviours: Iterable[Behaviour]) -> None:
        """Append behaviours for the next generation requests, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    def next_behaviour(self) -> Behaviour:
        """The next scripted behaviour, or the default one when the script is exhausted."""
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def pending(self) -> int:
        """How many scripted behaviours are still waiting for a request."""
        with self._lock:
            return len(self._queue)

    # -- observations -------------------------------------------------------------------------

    def record_request(self, body: dict[str, Any]) -> None:
        """Remember one ``/api/chat`` body (a deep copy)."""
        with self._changed:
            self._requests.append(copy.deepcopy(body))
            self._changed.notify_all()

    def requests(self) -> list[dict[str, Any]]:
        """Copies of the ``/api/chat`` bodies received so far, oldest first."""
        with self._lock:
            return copy.deepcopy(self._requests)

    def record_disconnect(self) -> None:
        """Count one client that left before its answer was complete."""
        with self._changed:
            self._disconnects += 1
            self._changed.notify_all()

    def disconnects(self) -> int:
        """How many clients left before their answer was complete."""
        with self._lock:
            return self._disconnects

    def begin_generation(self) -> None:
        """Count one generation in progress (and raise the peak if it is a new one)."""
        with self._lock:
            self._generating += 1
            self._max_generating = max(self._max_generating, self._generating)

    def end_generation(self) -> None:
        """Count one generation over (finished, failed, or its client gone)."""
        with self._lock:
            self._generating -= 1

    def generating(self) -> int:
        """Generations in progress now."""
        with self._lock:
            return self._generating

    def max_generating(self) -> int:
        """The most generations ever in progress at the same time."""
        with self._lock:
            return self._max_generating

    def wait_until(self, *, disconnects: int = 0, requests: int = 0, timeout: float) -> bool:
        """Block until at least that many disconnects and requests were seen, or ``timeout``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._disconnects >= disconnects and len(self._requests) >= requests,
                timeout=timeout,
            )
