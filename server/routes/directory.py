"""``GET /v1/directory``: the contacts, with an ETag so the app can cache the national card."""

from __future__ import annotations

import hashlib
import json

from fastapi import APIRouter, Query, Request, Response

from server.deps import DeviceId, ServicesDep
from server.schemas import CardContact

router = APIRouter(prefix="/v1", tags=["directory"])


@router.get("/directory", response_model=list[CardContact])
async def directory(
    request: Request,
    device: DeviceId,
    services: ServicesDep,
    region: str | None = Query(default=None, pattern=r"^(0[1-9]|[1-8][0-9]|9[0-5]|2A|2B|97[1-6])$"),
) -> Response:
    """National contacts, and the local ones of ``region`` when given."""
    snapshot = services.directory.snapshot
    contacts = [c for c in snapshot.contacts if c.region is None or c.region == region]
    body = json.dumps(
        [CardContact.of(c).model_dump() for c in contacts], ensure_ascii=False, sort_keys=True
    ).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "private, max-age=3600"}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
