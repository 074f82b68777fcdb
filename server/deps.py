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
    first (429), before any lookup, whatever its token."""
    throttle = auth_throttle(request, services)
    address = request.client.host if request.client else "unknown"
    wait = throttle.retry_after(address)
    if wait is not None:
        raise ApiError(
            429, "too_many_failed_logins", headers={"Retry-After": str(wait)}, retry_after_s=wait
        )
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

    throttle.checking(address)  # counts against the address until the answer is known
    known_bad = False
    try:
        device_id = await asyncio.to_thread(lookup)
        known_bad = device_id is None
    except Exception as exc:  # the storage failed, not the token: no failure counted
        log.warning("token check without database", extra={"error": type(exc).__name__})
        raise ApiError(401, "unauthorized") from exc
    finally:
        throttle.checked(address, ok=not known_bad)
    if device_id is None:
        services.tokens.forget(key)
        raise ApiError(401, "unauthorized")
    services.tokens.confirm(key, device_id)
    return device_id


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DeviceId = Annotated[str, Depends(get_device)]
