"""Prometheus metrics of the service, in a registry of its own (one per app)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_FAST = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)
_SLOW = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 20, 45, 90, 120, 180)


class Metrics:
    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
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
            "nuisances_queue_depth", "Turns waiting for a model slot.", registry=self.registry
        )
        self.queue_depth.set_function(lambda: float(queue_depth()))
        self.model_up = Gauge(
            "nuisances_model_up", "1 when the model server answers and has the model.",
            registry=self.registry,
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
