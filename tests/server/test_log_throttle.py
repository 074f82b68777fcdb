"""Repeated warnings and errors are written once per interval, with the count left out."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from server.logs import RepeatFilter, configure_logging, flush_suppressed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(
    level: int = logging.WARNING, name: str = "nuisances.x", msg: str = "db down", **extra: object
) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, msg, None, None)
    made.__dict__.update(extra)
    return made


def test_a_repeated_warning_passes_once_per_interval_then_says_how_many_were_left_out() -> None:
    clock = Clock()
    repeat = RepeatFilter(10.0, clock=clock)
    passed = []
    for _ in range(100):
        line = record(error="OperationalError")
        passed.append((repeat.filter(line), line.__dict__.get("suppressed")))
        clock.now += 0.05
    assert passed[0] == (True, None)
    assert [p for p, _ in passed[1:]] == [False] * 99
    clock.now = 10.0
    later = record(error="OperationalError")
    assert repeat.filter(later)
    assert later.__dict__["suppressed"] == 99
    again = record(error="OperationalError")
    assert not repeat.filter(again)  # a new interval began with the line just written


def test_conditions_are_told_apart_by_logger_message_and_error() -> None:
    repeat = RepeatFilter(10.0, clock=Clock())
    assert repeat.filter(record(error="A"))
    assert repeat.filter(record(error="B"))
    assert repeat.filter(record(msg="another phrase", error="A"))
    assert repeat.filter(record(name="nuisances.y", error="A"))
    assert not repeat.filter(record(error="A"))
    assert repeat.filter(record(level=logging.ERROR, msg="first line\ncontext 1"))
    assert not repeat.filter(record(level=logging.ERROR, msg="first line\ncontext 2"))


def test_info_lines_are_never_throttled() -> None:
    repeat = RepeatFilter(10.0, clock=Clock())
    assert all(repeat.filter(record(level=logging.INFO, msg="request")) for _ in range(1000))


def test_the_conditions_remembered_are_bounded() -> None:
    repeat = RepeatFilter(10.0, max_keys=5, clock=Clock())
    for n in range(100):
        assert repeat.filter(record(error=f"E{n}"))
    assert len(repeat._seen) == 5
    assert repeat.filter(record(error="E0"))  # forgotten long ago: written again
    assert not repeat.filter(record(error="E99"))


@pytest.fixture
def stderr() -> Iterator[io.StringIO]:
    """What ``configure_logging``'s handler writes (instead of stderr); the root logger's
    handlers and level are restored afterwards."""
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def redirect(stream: io.StringIO) -> logging.StreamHandler[Any]:
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    return handler


def test_asyncio_accept_errors_are_throttled_by_configure_logging(stderr: io.StringIO) -> None:
    configure_logging("INFO", interval_s=3600)
    redirect(stderr)
    loop = asyncio.new_event_loop()
    try:
        with socket.socket() as listening:
            for _ in range(1000):  # what asyncio's accept loop logs when out of file handles
                loop.call_exception_handler(
                    {
                        "message": "socket.accept() out of system resource",
                        "exception": OSError(24, "Too many open files"),
                        "socket": listening,
                    }
                )
        for _ in range(3):
            logging.getLogger("nuisances.http").info("request")
    finally:
        loop.close()
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    accept = [line for line in lines if line["logger"] == "asyncio"]
    assert len(accept) == 1
    assert accept[0]["event"].startswith("socket.accept() out of system resource")
    assert accept[0]["level"] == "error"
    assert [line["event"] for line in lines if line["logger"] == "nuisances.http"] == [
        "request"
    ] * 3


def test_configure_logging_keeps_its_old_signature(stderr: io.StringIO) -> None:
    configure_logging("WARNING")
    handler = redirect(stderr)
    (repeat,) = [f for f in handler.filters if isinstance(f, RepeatFilter)]
    assert repeat.interval_s == 10.0
    assert logging.getLogger().level == logging.WARNING


def test_a_flood_that_stops_within_the_interval_is_still_counted(stderr: io.StringIO) -> None:
    configure_logging("INFO", interval_s=0.2)
    redirect(stderr)
    log = logging.getLogger("nuisances.slots")
    for _ in range(50):
        log.warning("slots without the database", extra={"error": "OperationalError"})
    flush_suppressed()  # too early: the interval is not over, nothing to say yet
    import time

    time.sleep(0.25)
    flush_suppressed()  # the maintenance round, later
    flush_suppressed()  # nothing new since: no second line
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    slots = [line for line in lines if line["logger"] == "nuisances.slots"]
    assert [line.get("suppressed") for line in slots] == [None, 49]
    assert {line["error"] for line in slots} == {"OperationalError"}
