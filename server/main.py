"""The app: wiring only. Settings, migrations, services, middleware, routes, error handlers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from collections.abc import AsyncIterator

from fastapi import FastAPI

from llm.providers.base import Provider
from safety.model import default_model
from safety.ruleset import default_ruleset
from server.db.migrate import upgrade
from server.errors import install_error_handlers
from server.logs import configure_logging
from server.middleware import BodyLimit, RequestContext
from server.routes import chat, conversations, directory, operations
from server.services import Services
from server.settings import Settings, load_settings

__all__ = ["app_for_workers", "app_from_environment", "create_app"]

DESCRIPTION = """
The backend of the *journal des nuisances* assistant. Every message goes first through a
deterministic emergency detector; the safety card (emergency numbers from a trusted directory)
comes before anything else. Then a local model answers under hard budgets, or a deterministic
fallback does. Every `/v1` route needs `Authorization: Bearer <token>` (`nuisances tokens create`).
"""


def create_app(
    settings: Settings | None = None,
    *,
    provider: Provider | None = None,
    migrate: bool = True,
    freeze_gc: bool = False,
) -> FastAPI:
    """Build the app. ``provider`` replaces the configured one (tests: the fake models).

    ``freeze_gc`` (for a server process, not for tests that build many apps): once started,
    move every object loaded so far to the collector's permanent generation. A full
    collection over them takes tens of milliseconds, and whichever request triggers it pays:
    a detection charged that pause could run out of its budget and show a needless card.
    """
    chosen = settings or load_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if migrate:
            try:
                await asyncio.to_thread(upgrade, chosen.database_url)
            except Exception as exc:  # the card and fallbacks still answer without storage
                import logging

                logging.getLogger("nuisances.db").error(
                    "migrations failed at start-up", extra={"error": type(exc).__name__}
                )
        services = Services.build(chosen, provider)
        app.state.services = services
        await services.start()
        # Load the detector's rules and weights now, not on the first message.
        default_ruleset()
        default_model()
        if freeze_gc:
            gc.collect()
            gc.freeze()
            # Storage and detection run in threads: let the event loop (where every card is
            # sent) take the interpreter back within 1 ms rather than 5 when they hold it.
            sys.setswitchinterval(0.001)
        try:
            yield
        finally:
            await services.stop()

    app = FastAPI(
        title="Journal des nuisances — assistant",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, limit=chosen.body_max_bytes, timeout=chosen.limits.body_timeout_s)
    app.add_middleware(RequestContext)
    install_error_handlers(app)
    for module in (chat, directory, conversations, operations):
        app.include_router(module.router)
    return app


def app_from_environment() -> FastAPI:
    """For ``uvicorn server.main:app_from_environment --factory``."""
    settings = load_settings()
    configure_logging(settings.log_level, settings.limits.log_interval_s)
    return create_app(settings, freeze_gc=True)


def app_for_workers() -> FastAPI:
    """For each worker of ``nuisances serve --workers N`` (``uvicorn --factory``): settings
    from the environment, as the parent read them; the parent ran the migrations once."""
    settings = load_settings()
    configure_logging(settings.log_level, settings.limits.log_interval_s)
    return create_app(settings, migrate=False, freeze_gc=True)
