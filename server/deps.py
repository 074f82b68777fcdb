"""Dependencies, as ``Annotated`` aliases: tests override them rather than patch."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import Depends, Request

from server.auth_throttle import AuthThrottle
from server.db import repository
from server.errors import ApiError
from server.services import Services
from server.settings import Settings

__all__ = ["DeviceId", "ServicesDep", "SettingsDep"]

log = logging.getLogger("nuisances.auth")


async def get_services(request: Request) -> Services:  # async: no worker thread
    services: Services = request.app.state.services
    return services


async def get_settings(services: Annotated[Services, Depends(get_services)]) -> Settings:
    return services.settings


def auth_throttle(request: Request, services: Services) -> AuthThrottle:
    """The app's failed-authentication throttle, made on first use from the settings."""
    throttle: AuthThrottle | None = getattr(request.app.state, "auth_throttle", None)
    if throttle is None:
        throttle = request.app.state.auth_throttle = AuthThrottle.from_limits(
            services.settings.limits
        )
    return throttle


async def get_device(request: Request, services: Annotated[Services, Depends(get_services)]) -> str:
    """The device of the bearer token, from memory when the token was confirmed by the
    database in the last ``token_cache_max_age_s`` seconds (``server.token_cache``): the card
    never waits for storage or for a worker thread. A background refresh re-checks every
    cached token each ``token_refresh_s`` seconds, so a revocation is honoured within that
    time, database or not. A token not in memory is checked in the database.

    An address that failed too many token checks lately (``server.auth_throttle``) is refused
    first (429), before any lookup, whatever its token. Lookups of one address take turns (a
    few at once, the others wait): each starts only if the address is still within its budget.
    Tokens already in memory never wait and never count."""
    throttle = auth_throttle(request, services)
    address = request.client.host if request.client else "unknown"
    wait = throttle.retry_after(address)
    if wait is not None:
        raise _too_many_failed_logins(wait)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        if token:  # a token was presented: a failed check (no header at all is not a guess)
            throttle.failed(address)
        raise ApiError(401, "unauthorized")
    key = repository.token_key(token)
    known = services.tokens.without_database(key)
    if known is not None:
        return known

    def lookup() -> str | None:
        with services.sessions() as session:
            device = repository.device_by_token(session, token)
            return None if device is None else device.id

    turn = await throttle.turn(address)
    if isinstance(turn, int):
        raise _too_many_failed_logins(turn)
    answer = asyncio.ensure_future(asyncio.to_thread(lookup))
    # The turn ends when the database answers, even if the client left meanwhile: the places
    # bound the lookups really running, and a guess is counted whether or not it was heard.
    answer.add_done_callback(lambda done: turn.end(ok=not _known_bad(done)))
    try:
        device_id = await asyncio.shield(answer)
    except Exception as exc:  # the storage failed, not the token: no failure counted
        log.warning("token check without database", extra={"error": type(exc).__name__})
        raise ApiError(401, "unauthorized") from exc
    if device_id is None:
        services.tokens.forget(key)
        raise ApiError(401, "unauthorized")
    services.tokens.confirm(key, device_id)
    return device_id


def _too_many_failed_logins(wait: int) -> ApiError:
    return ApiError(
        429, "too_many_failed_logins", headers={"Retry-After": str(wait)}, retry_after_s=wait
    )


def _known_bad(done: asyncio.Future[str | None]) -> bool:
    """The lookup answered that the token is not valid (not: it failed, or was cancelled)."""
    return not done.cancelled() and done.exception() is None and done.result() is None


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DeviceId = Annotated[str, Depends(get_device)]
