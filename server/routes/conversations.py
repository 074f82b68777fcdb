"""``GET`` and ``DELETE /v1/conversations/{id}``: read back, or erase, a conversation."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Response
from sqlalchemy.exc import SQLAlchemyError

from server.db import repository
from server.deps import DeviceId, ServicesDep
from server.errors import ApiError

router = APIRouter(prefix="/v1", tags=["conversations"])
_ID = Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


@router.get("/conversations/{conversation_id}")
async def read(
    conversation_id: str = _ID, *, device: DeviceId, services: ServicesDep
) -> dict[str, Any]:
    def load() -> list[dict[str, Any]] | None:
        with services.sessions() as session:
            turns = repository.conversation_turns(session, device, conversation_id)
            if turns is None:
                return None
            return [
                {
                    "client_message_id": t.client_message_id,
                    "created_at": t.created_at.isoformat(),
                    "message": t.message,
                    "reply": t.reply,
                    "category": t.category,
                    "status": t.status,
                    "source": t.source,
                    "state": t.state,
                }
                for t in turns
            ]

    try:
        turns = await asyncio.to_thread(load)
    except SQLAlchemyError as exc:
        raise ApiError(503, "storage_unavailable") from exc
    if turns is None:
        raise ApiError(404, "not_found")
    return {"conversation_id": conversation_id, "turns": turns}


@router.delete("/conversations/{conversation_id}", status_code=204)
async def erase(conversation_id: str = _ID, *, device: DeviceId, services: ServicesDep) -> Response:
    """Erase the conversation and everything kept of it: its turns, the answers cached from
    it, its lines in the audit log; on SQLite the write-ahead log is truncated after. Turns
    still in the spool (answered during a database outage) are stored first, then erased."""
    tag = services.tags.conversation(device, conversation_id)

    def delete() -> int:
        if services.spool.size():
            services.spool.replay(services.restore)
        with services.sessions() as session:
            erased = repository.erase_conversation(session, device, conversation_id, tag)
            repository.compact(session)
            return erased

    try:
        erased = await asyncio.to_thread(delete)
    except SQLAlchemyError as exc:
        raise ApiError(503, "storage_unavailable") from exc
    services.forget_conversation(device, conversation_id)
    audit_lines = await asyncio.to_thread(services.assistant.harness.audit.erase, tag)
    if erased == 0 and audit_lines == 0:
        raise ApiError(404, "not_found")
    return Response(status_code=204)
