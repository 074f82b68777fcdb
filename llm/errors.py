"""Every way a model call fails, translated at the edge into one small tree.

Providers catch their client's exceptions where they happen and raise one of these instead,
``from`` the original, so that nothing above the provider knows about httpx or ollama::

    ModelError                      status in the reply   what happened
    ├── Unavailable                 "unavailable"
    │   ├── ConnectionRefused                             nothing listens, reset before any byte
    │   ├── HostNotFound                                  DNS failure
    │   ├── ModelNotFound                                 404 "model x not found" (2 spellings)
    │   └── ServerError                                   5xx other than 503
    ├── Busy                        "busy"                503 (queue full), 429 (rate limited)
    ├── GenerationTimeout           "timeout"             kind: connect | first_token | idle | total
    ├── ProtocolError               "unavailable"
    │   ├── MalformedLine                                 a line that is not JSON / SSE
    │   ├── StreamError                                   {"error": ...} after the stream started
    │   └── IncompleteStream                              the stream ended without "done"
    └── DegenerateOutput            "invalid_output"      loop guard: the same chunk over and over

Each carries what the audit log needs: the provider's name, the model, the stage at which it
failed, the HTTP status when there was one, and a short detail that never holds the user's text.
Admission refusals (``Busy`` for a slot, ``QuotaExceeded``) are raised by ``llm.admission``.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "Busy",
    "ConnectionRefused",
    "DegenerateOutput",
    "GenerationTimeout",
    "HostNotFound",
    "IncompleteStream",
    "MalformedLine",
    "ModelError",
    "ModelNotFound",
    "ProtocolError",
    "QuotaExceeded",
    "ServerError",
    "StreamError",
    "Unavailable",
]

Stage = Literal["connect", "request", "first_token", "stream", "health", "warm_up", "admission"]
Status = Literal["timeout", "busy", "quota", "unavailable", "invalid_output"]


class ModelError(Exception):
    """A model call that did not give a usable answer. ``status`` is the reply's status."""

    status: Status = "unavailable"

    def __init__(
        self,
        detail: str,
        *,
        provider: str = "",
        model: str = "",
        stage: Stage = "request",
        http_status: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.provider = provider
        self.model = model
        self.stage = stage
        self.http_status = http_status

    @property
    def reason(self) -> str:
        """A short machine-readable reason, e.g. ``timeout.first_token`` or ``busy.http_503``."""
        return type(self).__name__

    def audit(self) -> dict[str, str | int | None]:
        """What the audit log keeps of this error (no user text, no secrets)."""
        return {
            "error": type(self).__name__,
            "status": self.status,
            "reason": self.reason,
            "provider": self.provider,
            "model": self.model,
            "stage": self.stage,
            "http_status": self.http_status,
            "detail": self.detail[:300],
        }


class Unavailable(ModelError):
    status: Status = "unavailable"


class ConnectionRefused(Unavailable):
    pass


class HostNotFound(Unavailable):
    pass


class ModelNotFound(Unavailable):
    pass


class ServerError(Unavailable):
    pass


class Busy(ModelError):
    status: Status = "busy"

    @property
    def reason(self) -> str:
        return f"busy.http_{self.http_status}" if self.http_status else "busy.slots"


TimeoutKind = Literal["connect", "first_token", "idle", "total"]


class GenerationTimeout(ModelError):
    status: Status = "timeout"

    def __init__(
        self,
        kind: TimeoutKind,
        budget_s: float | None,
        *,
        provider: str = "",
        model: str = "",
        stage: Stage = "stream",
    ) -> None:
        detail = (
            f"{kind} timeout" if budget_s is None else f"{kind} budget of {budget_s:g} s exhausted"
        )
        super().__init__(detail, provider=provider, model=model, stage=stage)
        self.kind = kind
        self.budget_s = budget_s

    @property
    def reason(self) -> str:
        return f"timeout.{self.kind}"


class ProtocolError(ModelError):
    status: Status = "unavailable"


class MalformedLine(ProtocolError):
    pass


class StreamError(ProtocolError):
    pass


class IncompleteStream(ProtocolError):
    pass


class DegenerateOutput(ModelError):
    status: Status = "invalid_output"


class QuotaExceeded(ModelError):
    """The daily quota of a device, or the global one, is reached."""

    status: Status = "quota"

    def __init__(self, scope: Literal["device", "global"], limit: int) -> None:
        super().__init__(f"daily {scope} quota of {limit} reached", stage="admission")
        self.scope = scope
        self.limit = limit

    @property
    def reason(self) -> str:
        return f"quota.{self.scope}"
