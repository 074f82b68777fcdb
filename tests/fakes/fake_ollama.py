"""A protocol-faithful fake Ollama server on a real port, for sync and async tests.

    with FakeOllama(models=["qwen2.5:0.5b-instruct"], loaded=True) as fake:
        fake.enqueue(Behaviour.normal("Bonjour, notez les dates.", chunk_size=4))
        ...  # point the code under test at fake.url
        assert fake.requests[0]["model"] == "qwen2.5:0.5b-instruct"

Each ``/api/chat`` request with messages takes the next enqueued :class:`Behaviour` (or the
default one). Requests without messages are model loads (``done_reason: "load"``) or, with
``keep_alive: 0``, unloads: they follow the protocol and never consume the script. A model
not in ``models`` gets 404 ``model 'M' not found`` on ``/api/chat`` and ``/api/show``.

Threads are daemons; :meth:`FakeOllama.close` stops accepting, interrupts every behaviour's
waits, shuts live connections down and joins the threads (bounded), so a test cannot hang on it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from .lifecycle import ClosedOnExit
from .ollama_behaviour import Behaviour
from .ollama_handler import FakeHTTPServer
from .ollama_state import OllamaState

DEFAULT_MODEL = "qwen2.5:0.5b-instruct"
DEFAULT_VERSION = "0.32.15"
_RESERVED: list[socket.socket] = []


def unused_port_url(host: str = "127.0.0.1") -> str:
    """The URL of a port where nothing listens: connecting to it is refused at once.

    The port stays bound (without listening) for the life of the process, so no other test
    can start a server on it meanwhile.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    _RESERVED.append(sock)
    return f"http://{host}:{sock.getsockname()[1]}"


class FakeOllama(ClosedOnExit):
    """A fake ``ollama serve`` on ``127.0.0.1``, started on construction."""

    #: The URL of a port where nothing listens (see :func:`unused_port_url`).
    unused_port_url = staticmethod(unused_port_url)

    def __init__(
        self,
        models: Iterable[str] = (DEFAULT_MODEL,),
        *,
        loaded: bool = False,
        thinking: Iterable[str] = (),
        default: Behaviour | None = None,
        version: str = DEFAULT_VERSION,
    ) -> None:
        """Serve ``models`` (all loaded when ``loaded``); ``thinking`` names thinking models.

        ``default`` answers generation requests once the script is empty (a short French reply
        streamed in 4-character chunks when not given); ``version`` is ``/api/version``'s.
        """
        self._state = OllamaState(
            models,
            loaded=loaded,
            thinking=thinking,
            default=default or Behaviour.normal(),
            version=version,
        )
        self._server = FakeHTTPServer(self._state)
        self._closed = False
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            daemon=True,
            name="fake-ollama-accept",
        )
        self._thread.start()

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the fake listens on."""
        return self._server.server_port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (what ``OLLAMA_HOST`` would be)."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving and shut every connection down; idempotent, returns within ~2 s."""
        if self._closed:
            return
        self._closed = True
        self._state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._server.abort_connections()
        self._server.join_connections(timeout=2.0)
        self._thread.join(timeout=2.0)

    # -- script -------------------------------------------------------------------------------

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Script the next generation requests, one behaviour each, in order."""
        self._state.enqueue(behaviours)

    @property
    def pending(self) -> int:
        """Scripted behaviours not yet consumed."""
        return self._state.pending()

    # -- models -------------------------------------------------------------------------------

    @property
    def loaded_models(self) -> list[str]:
        """Names of the models ``/api/ps`` currently lists."""
        return [card.name for card, _ in self._state.running()]

    def unload(self, model: str | None = None) -> None:
        """Unload ``model`` (every model when None), as if its keep-alive had expired."""
        self._state.unload(model)

    # -- observations -------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copies of the JSON bodies received on ``/api/chat`` (loads included), oldest first."""
        return self._state.requests()

    @property
    def disconnects(self) -> int:
        """How many clients closed their connection before their answer was complete."""
        return self._state.disconnects()

    def wait_for_disconnect(self, timeout: float = 5.0, count: int = 1) -> bool:
        """Block until ``count`` disconnects were observed in all; False after ``timeout``."""
        return self._state.wait_until(disconnects=count, timeout=timeout)

    async def wait_for_disconnect_async(self, within: float = 5.0, count: int = 1) -> bool:
        """:meth:`wait_for_disconnect` without blocking the event loop (polls every 10 ms)."""
        deadline = time.monotonic() + within
        while self.disconnects < count:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    @property
    def generating(self) -> int:
        """Generations in progress now: requests with messages, from their start (first-byte
        delay included) until just before their last line, or their client's departure.
        Loads, unloads and scripted refusals (a ``status`` other than 200) are not counted."""
        return self._state.generating()

    @property
    def max_concurrent(self) -> int:
        """The most generations that were ever in progress at the same time (the peak of
        :attr:`generating`): above the provider's ``parallel``, its slots were overbooked."""
        return self._state.max_generating()

    def wait_for_requests(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``count`` ``/api/chat`` bodies were received in all; False on timeout."""
        return self._state.wait_until(requests=count, timeout=timeout)
