"""Test doubles that speak real protocols on real ports (see ``fake_ollama``)."""

from .fake_ollama import DEFAULT_MODEL, FakeOllama, unused_port_url
from .ollama_behaviour import (
    BUSY_MESSAGE,
    NOT_FOUND_DOUBLE_QUOTES,
    NOT_FOUND_LEGACY,
    NOT_FOUND_SINGLE_QUOTES,
    Behaviour,
)

__all__ = [
    "BUSY_MESSAGE",
    "DEFAULT_MODEL",
    "NOT_FOUND_DOUBLE_QUOTES",
    "NOT_FOUND_LEGACY",
    "NOT_FOUND_SINGLE_QUOTES",
    "Behaviour",
    "FakeOllama",
    "unused_port_url",
]
