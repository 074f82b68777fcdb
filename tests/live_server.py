"""A real uvicorn server on a free local port, in a thread: for tests that need real sockets
(a client hanging up, a CLI pointed at a running server)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI


@contextlib.contextmanager
def serving(app: FastAPI, *, start_timeout_s: float = 20.0, **config: Any) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL once it accepts connections.
    ``config`` goes to ``uvicorn.Config`` (``log_level``, ``backlog``...)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config.setdefault("log_config", None)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    try:
        if not server.started:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
