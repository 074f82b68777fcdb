"""Providers behind one protocol, chosen by configuration (``ProviderConfig.type``)."""

from __future__ import annotations

from llm.config import Budgets, ProviderConfig
from llm.providers.base import Provider
from llm.providers.none import NoProvider
from llm.providers.ollama import OllamaProvider
from llm.providers.openai_compat import OpenAICompatProvider

__all__ = ["NoProvider", "OllamaProvider", "OpenAICompatProvider", "Provider", "build_provider"]


def build_provider(config: ProviderConfig, budgets: Budgets) -> Provider:
    """The provider a configuration names."""
    if config.type == "ollama":
        return OllamaProvider(config, budgets)
    if config.type == "openai_compat":
        return OpenAICompatProvider(config, budgets)
    return NoProvider(config)
