"""Prometheus metrics of the service, in a registry of its own (one per app).

With several API processes (``nuisances serve --workers N``), ``prometheus_client``'s
multiprocess mode is on (``PROMETHEUS_MULTIPROC_DIR``, set by ``serve`` before the workers
start): every process writes its values to files there, and ``/metrics``, whichever worker
answers, adds them up (counters and histograms summed; the queue depth summed over live
processes; ``model_up`` the highest of the live ones).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

__all__ = ["Metrics", "multiprocess_dir"]

_FAST = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)
_SLOW = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 20, 45, 90, 120, 180)


def multiprocess_dir() -> str | None:
    """The folder of multiprocess mode, when it is on (read at import by prometheus_client)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self._queue_depth = queue_depth
        self.turns = Counter(
            "nuisances_turns",
            "Chat turns answered, by safety category, status and source.",
            ["category", "status", "source"],
            registry=self.registry,
        )
        self.detection = Histogram(
            "nuisances_detection_seconds", "Time of the emergency detector per message.",
            buckets=_FAST, registry=self.registry,
        )  # fmt: skip
        self.queue_wait = Histogram(
            "nuisances_queue_wait_seconds", "Wait for a model slot.",
            buckets=_SLOW, registry=self.registry,
        )  # fmt: skip
        self.first_token = Histogram(
            "nuisances_first_token_seconds", "Time to the model's first token.",
            buckets=_SLOW, registry=self.registry,
        )  # fmt: skip
        self.total = Histogram(
            "nuisances_turn_seconds", "Whole turn, request to answer.",
            buckets=_SLOW, registry=self.registry,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "nuisances_queue_depth", "Turns waiting for a model slot.",
            registry=self.registry, multiprocess_mode="livesum",
        )  # fmt: skip
        self.model_up = Gauge(
            "nuisances_model_up", "1 when the model server answers and has the model.",
            registry=self.registry, multiprocess_mode="livemax",
        )  # fmt: skip
        self.spooled = Counter(
            "nuisances_spooled_turns", "Turns kept in the spool while the database was away.",
            registry=self.registry,
        )  # fmt: skip
        self.spool_lost = Counter(
            "nuisances_spool_lost_turns", "Turns answered but not kept (spool full or unwritable).",
            registry=self.registry,
        )  # fmt: skip
        self.conflicts = Counter(
            "nuisances_idempotency_conflicts",
            "Requests refused: another message under an idempotency key already used.",
            registry=self.registry,
        )
        self.refused = Counter(
            "nuisances_refused_turns",
            "Chat requests refused after their card, by reason (too_many_turns...).",
            ["reason"],
            registry=self.registry,
        )
        self.masked_numbers = Counter(
            "nuisances_masked_numbers",
            "Numbers written by the model and masked before they reached the client.",
            registry=self.registry,
        )
        self.markup_removed = Counter(
            "nuisances_markup_removed",
            "Tags, links, URIs and code fences removed from the model's answers.",
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The text ``/metrics`` serves: this process's values, or every live process's."""
        self.queue_depth.set(float(self._queue_depth()))
        folder = multiprocess_dir()
        if folder is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def sample(self) -> None:
        """Write the gauges this process computes (called periodically, for the others)."""
        self.queue_depth.set(float(self._queue_depth()))
