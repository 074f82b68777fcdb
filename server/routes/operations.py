"""``/healthz`` (liveness), ``/readyz`` (readiness), ``/metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from server.deps import ServicesDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers. No database, no model call."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep) -> JSONResponse:
    """Database, model server, model present. ``degraded`` (200) when only the model is
    missing, since fallbacks still answer; ``fail`` (503) when the database is down."""
    database = await asyncio.to_thread(services.database_ok)
    health = await services.check_model()
    checks: dict[str, Any] = {
        "database": "ok" if database else "fail",
        "model_server": "ok" if health.reachable else "fail",
        "model_present": "ok" if health.model_present else "fail",
        "model_loaded": {True: "ok", False: "no", None: "unknown"}[health.model_loaded],
        "provider": services.settings.provider.type,
        "model": services.settings.provider.model,
    }
    if not database:
        status, code = "fail", 503
    elif health.ok:
        status, code = "ok", 200
    else:
        status, code = "degraded", 200
    return JSONResponse({"status": status, "checks": checks}, status_code=code)


@router.get("/metrics")
async def metrics(services: ServicesDep) -> Response:
    return Response(services.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
