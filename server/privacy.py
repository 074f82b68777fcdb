"""Keyed hashes: how the audit log, the answer cache and the logs name a device, a
conversation or a message without holding it.

HMAC-SHA-256 under the deployment's secret (``data_dir/cache.key``, 0600), so a hash cannot be
reversed by trying likely values ("au secours", a device id seen elsewhere) without the key.
Every process and machine of one deployment must share the key (see the README).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

__all__ = ["Tags"]


@dataclass(frozen=True)
class Tags:
    secret: bytes

    def _tag(self, kind: str, *parts: str) -> str:
        message = "\0".join((kind, *parts)).encode("utf-8", "surrogatepass")
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()[:32]

    def device(self, device_id: str) -> str:
        return self._tag("device", device_id)

    def conversation(self, device_id: str, conversation_id: str) -> str:
        return self._tag("conversation", device_id, conversation_id)

    def message(self, text: str) -> str:
        return self._tag("message", text)

    def for_turn(self, device_id: str, conversation_id: str, text: str) -> dict[str, str]:
        return {
            "device": self.device(device_id),
            "conversation": self.conversation(device_id, conversation_id),
            "message": self.message(text),
        }
