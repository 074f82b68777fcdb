"""The text files of ``prompts/``, read once, and their hash."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

__all__ = ["prompt_hash", "prompt_text"]


def _root() -> Traversable:
    return resources.files("prompts")


@cache
def prompt_text(relative: str) -> str:
    """The text of ``prompts/<relative>``, stripped; FileNotFoundError names the file."""
    node = _root()
    for part in relative.split("/"):
        node = node / part
    if not node.is_file():
        raise FileNotFoundError(f"prompts/{relative}")
    return node.read_text(encoding="utf-8").strip()


def _files(node: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        name = f"{prefix}{child.name}"
        if child.is_dir():
            found.extend(_files(child, name + "/"))
        elif child.name.endswith(".md"):
            found.append((name, child))
    return found


@cache
def prompt_hash() -> str:
    """SHA-256 over the assistant's prompt files (names and contents), recorded with each turn.
    The judge's rubric (``prompts/judge/``) is the bench's, and has a hash of its own."""
    digest = hashlib.sha256()
    for name, node in _files(_root()):
        if name.startswith("judge/"):
            continue
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(node.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
