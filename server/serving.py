"""How uvicorn serves the app: one place for the options `nuisances serve` and the benches use.

The limits that keep a process up under abuse live at the connection level (see
``LimitsSettings`` and ``server.protection``): bounded connections, a header read timeout
(the body's is ``BodyLimit``'s), a keep-alive longer than the clients' own.
"""

from __future__ import annotations

from typing import Any

from server.protection import ProtectedH11Protocol, configure
from server.settings import Settings

__all__ = ["uvicorn_options"]


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config`` (app, host and port aside).

    Configures this process's connection bounds from ``settings.limits`` (raising its
    open-files limit) and exports them for workers uvicorn would spawn.
    """
    limits = settings.limits
    configure(limits)
    return {
        "log_config": None,
        "timeout_graceful_shutdown": 5,
        "timeout_keep_alive": limits.keep_alive_s,
        "backlog": 2048,
        "proxy_headers": True,
        "forwarded_allow_ips": limits.forwarded_allow_ips,
        # A class, not a name: pickled by reference for spawned workers (see protection).
        "http": ProtectedH11Protocol,
    }
