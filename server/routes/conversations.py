"""``GET`` and ``DELETE /v1/conversations/{id}``: read back, or erase, a conversation."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Response

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

    turns = await asyncio.to_thread(load)
    if turns is None:
        raise ApiError(404, "not_found")
    return {"conversation_id": conversation_id, "turns": turns}


@router.delete("/conversations/{conversation_id}", status_code=204)
async def erase(conversation_id: str = _ID, *, device: DeviceId, services: ServicesDep) -> Response:
    """Erase the conversation and everything stored of it."""

    def delete() -> int:
        with services.sessions() as session:
            return repository.erase_conversation(session, device, conversation_id)

    if await asyncio.to_thread(delete) == 0:
        raise ApiError(404, "not_found")
    return Response(status_code=204)
