"""The flow policy: before every send, what may leave the process, and on which conditions.

A pure function of the provider's configuration, the payload's data classes and a declarative
``PolicyConfig``. Closed by default:

- an element without a data class blocks the send;
- a provider declared ``local`` counts as ``external`` unless its host is loopback or listed
  in ``trusted_hosts`` (the compose service name ``ollama``, say);
- an external provider is refused unless ``allow_external``; when allowed, the payload must be
  pseudonymised and pass the leak scan first, and only ``external_classes`` may go;
- a local provider gets the raw text unless ``pseudonymise_local``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from llm.config import ProviderConfig
from llm.payload import DataClass, PayloadElement

__all__ = ["Decision", "PolicyConfig", "decide", "effective_class"]


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    trusted_hosts: tuple[str, ...] = ("ollama",)
    allow_external: bool = False
    external_classes: frozenset[DataClass] = Field(
        default=frozenset({"pseudonym", "user_text", "contacts", "prompt", "metadata"})
    )
    pseudonymise_local: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    provider_class: Literal["local", "external"]
    pseudonymise: bool
    leak_scan: bool
    reasons: tuple[str, ...]

    def audit(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "provider_class": self.provider_class,
            "pseudonymise": self.pseudonymise,
            "leak_scan": self.leak_scan,
            "reasons": list(self.reasons),
        }


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def effective_class(
    provider: ProviderConfig, config: PolicyConfig
) -> tuple[Literal["local", "external"], str]:
    """The class the policy applies, and why."""
    host = urlsplit(str(provider.base_url)).hostname or ""
    if provider.data_class == "external":
        return "external", f"provider {provider.name} is declared external"
    if _is_loopback(host):
        return "local", f"provider {provider.name} is local on loopback ({host})"
    if host in config.trusted_hosts:
        return "local", f"provider {provider.name} is local on trusted host {host}"
    return "external", (
        f"provider {provider.name} is declared local but {host} is neither loopback nor trusted"
    )


def decide(
    provider: ProviderConfig, elements: Sequence[PayloadElement], config: PolicyConfig
) -> Decision:
    provider_class, why = effective_class(provider, config)
    reasons = [why]
    unclassified = [e.name for e in elements if e.data_class is None]
    if unclassified:
        reasons.append(f"unclassified elements: {', '.join(unclassified)}")
        return Decision(False, provider_class, False, False, tuple(reasons))
    if provider_class == "local":
        pseudonymise = config.pseudonymise_local
        reasons.append("pseudonymised" if pseudonymise else "raw text stays on this machine")
        return Decision(True, "local", pseudonymise, False, tuple(reasons))
    if not config.allow_external:
        reasons.append("external providers are not allowed (policy.allow_external is false)")
        return Decision(False, "external", True, True, tuple(reasons))
    refused = sorted(
        {e.data_class for e in elements if e.data_class not in config.external_classes}
    )  # type: ignore[type-var]
    if refused:
        reasons.append(f"data classes not allowed externally: {', '.join(map(str, refused))}")
        return Decision(False, "external", True, True, tuple(reasons))
    reasons.append("external allowed after pseudonymisation and the leak scan")
    return Decision(True, "external", True, True, tuple(reasons))
