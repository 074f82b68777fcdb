"""Which model is which: model servers' addresses, Ollama digests, and the self-judge rule.

A judge must not be the model under test. Two endpoints are taken for the same model when
their digests match (when both servers give one), or when they serve the same model name (the
same weights may sit behind two ports, as in CI where two llama.cpp servers load one GGUF), or
when they are the same provider type at the same address with the same model.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

__all__ = ["ModelIdentity", "normalise_url", "ollama_digest", "self_judge_reasons"]


@dataclass(frozen=True)
class ModelIdentity:
    provider_type: str | None
    base_url: str | None
    model: str | None
    digest: str | None = None


def normalise_url(url: str | None) -> str | None:
    """``http://localhost:11434/v1/`` as ``http://127.0.0.1:11434``: scheme, host, port."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if host in ("localhost", "::1", "0.0.0.0"):  # noqa: S104 - a name to compare, not bound
        host = "127.0.0.1"
    default = 443 if parts.scheme == "https" else 80
    port = parts.port or default
    path = parts.path.rstrip("/").removesuffix("/v1")
    return f"{parts.scheme}://{host}:{port}{path}"


def _model_name(name: str | None) -> str | None:
    """Ollama's ``qwen2.5`` is ``qwen2.5:latest``; case never matters."""
    if not name:
        return None
    folded = name.strip().lower()
    return folded if ":" in folded else f"{folded}:latest"


def self_judge_reasons(target: ModelIdentity, judge: ModelIdentity) -> list[str]:
    """Why ``judge`` may be the model under test (empty: they differ)."""
    reasons: list[str] = []
    if target.digest and judge.digest and target.digest == judge.digest:
        reasons.append(f"same model digest ({judge.digest[:12]})")
    same_name = _model_name(target.model) is not None and _model_name(target.model) == _model_name(
        judge.model
    )
    if same_name:
        reasons.append(f"same model name ({judge.model})")
    same_endpoint = (
        target.provider_type == judge.provider_type
        and normalise_url(target.base_url) is not None
        and normalise_url(target.base_url) == normalise_url(judge.base_url)
    )
    if same_endpoint and same_name:
        reasons.append(f"same {judge.provider_type} server ({normalise_url(judge.base_url)})")
    return reasons


async def ollama_digest(base_url: str, model: str, timeout_s: float = 5.0) -> str | None:
    """The digest ``/api/tags`` gives for ``model``, or None (not Ollama, absent, no answer)."""
    wanted = _model_name(model)
    try:
        async with httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout_s) as http:
            response = await http.get("/api/tags")
            response.raise_for_status()
            entries = response.json().get("models", [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        names = {_model_name(str(entry.get(k) or "")) for k in ("name", "model")}
        digest = entry.get("digest")
        if wanted in names and isinstance(digest, str) and digest:
            return digest
    return None
