"""Dependencies, as ``Annotated`` aliases: tests override them rather than patch."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import Depends, Request

from server.db import repository
from server.errors import ApiError
from server.services import Services
from server.settings import Settings

__all__ = ["DeviceId", "ServicesDep", "SettingsDep"]

log = logging.getLogger("nuisances.auth")


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def get_settings(services: Annotated[Services, Depends(get_services)]) -> Settings:
    return services.settings


async def get_device(request: Request, services: Annotated[Services, Depends(get_services)]) -> str:
    """The device of the bearer token, from memory when the token was confirmed by the
    database in the last ``token_cache_max_age_s`` seconds (``server.token_cache``): the card
    never waits for storage or for a worker thread. A background refresh re-checks every
    cached token each ``token_refresh_s`` seconds, so a revocation is honoured within that
    time, database or not. A token not in memory is checked in the database."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise ApiError(401, "unauthorized")
    key = repository.token_key(token)
    known = services.tokens.without_database(key)
    if known is not None:
        return known

    def lookup() -> str | None:
        with services.sessions() as session:
            device = repository.device_by_token(session, token)
            return None if device is None else device.id

    try:
        device_id = await asyncio.to_thread(lookup)
    except Exception as exc:
        log.warning("token check without database", extra={"error": type(exc).__name__})
        raise ApiError(401, "unauthorized") from exc
    if device_id is None:
        services.tokens.forget(key)
        raise ApiError(401, "unauthorized")
    services.tokens.confirm(key, device_id)
    return device_id


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DeviceId = Annotated[str, Depends(get_device)]
