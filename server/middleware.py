"""ASGI middleware: request ids and access logs, and hard limits on body size and pace."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import error_response
from server.logs import request_id

__all__ = ["BODY_TOTAL_FACTOR", "BodyLimit", "RequestContext"]

log = logging.getLogger("nuisances.http")

BODY_TOTAL_FACTOR = 1  # the whole body (32 KB at most) within one timeout, as each piece


class RequestContext:
    """Gives each request an id (``X-Request-ID``, echoed back) and logs it, without bodies."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-request-id", b"").decode("latin-1")[:64]
        rid = given if given.replace("-", "").isalnum() else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        status = {"code": 500}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                "request",
                extra={
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status_code": status["code"],
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            request_id.reset(token)


class BodyLimit:
    """Refuses a body larger than ``limit`` bytes with a 413, whether declared or streamed,
    and one that arrives too slowly with a 408 (``body_timeout``), closing the connection.

    The body (small by construction) is read here up to the limit, then replayed to the app.
    With a ``timeout``, each piece of the body must come within ``timeout`` seconds, and the
    whole body within ``total`` seconds (``BODY_TOTAL_FACTOR`` x ``timeout`` unless given):
    a client trickling one byte every few seconds is cut off too.
    """

    def __init__(
        self, app: ASGIApp, limit: int, timeout: float | None = None, total: float | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout
        if total is None and timeout is not None:
            total = BODY_TOTAL_FACTOR * timeout
        self.total = total

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await error_response(413, "body_too_large", limit=self.limit)(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = None if self.total is None else loop.time() + self.total
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await self._next(receive, deadline)
            except TimeoutError:
                client = scope.get("client")
                log.warning(
                    "request body too slow",
                    extra={"client": client[0] if client else None, "path": scope.get("path")},
                )
                response = error_response(408, "body_timeout", headers={"Connection": "close"})
                await response(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message]), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await error_response(413, "body_too_large", limit=self.limit)(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], then=receive), send)

    async def _next(self, receive: Receive, deadline: float | None) -> Message:
        """The next piece of the body, or ``TimeoutError`` when it does not come in time."""
        if self.timeout is None:
            return await receive()
        wait = self.timeout
        if deadline is not None:
            wait = min(wait, deadline - asyncio.get_running_loop().time())
        if wait <= 0:
            raise TimeoutError
        async with asyncio.timeout(wait):
            return await receive()


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive
