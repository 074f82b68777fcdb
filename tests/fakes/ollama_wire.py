"""Wire-level helpers of the fake Ollama server: JSON as Go writes it, times, models, metrics.

Everything here mirrors what the real server (``ollama/ollama``, Go + gin) puts on the wire:

- ``encoding/json`` output: compact, UTF-8, with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
  as ``\\u003c``-style sequences (Go's HTML-safe default), zero metrics omitted (``omitempty``).
- ``time.Time`` values as RFC 3339 with nanoseconds and trailing zeros trimmed
  (``2024-09-12T21:17:29.110811Z``).
- ``/api/tags``, ``/api/ps`` and ``/api/show`` bodies with the fields of ``api/types.go``
  (``ListModelResponse``, ``ProcessModelResponse``, ``ShowResponse``, ``ModelDetails``).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_GO_HTML_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}

#: Nanoseconds per unit of Go's ``time.ParseDuration``.
_GO_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

#: ``keep_alive`` when the request does not say (Ollama's ``OLLAMA_KEEP_ALIVE`` default).
DEFAULT_KEEP_ALIVE_NS = 5 * 60 * 1_000_000_000
#: Go's ``math.MaxInt64``: what a negative ``keep_alive`` means ("stay loaded forever").
FOREVER_NS = 2**63 - 1


def go_json(value: Any) -> bytes:
    """Encode ``value`` the way Go's ``json.Marshal`` does (compact, HTML characters escaped)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in _GO_HTML_ESCAPES.items():
        text = text.replace(char, escaped)
    return text.encode("utf-8")


def go_time(epoch_ns: int | None = None) -> str:
    """Format a UTC instant like Go's ``time.Time`` JSON encoding (RFC 3339, nanoseconds)."""
    ns = time.time_ns() if epoch_ns is None else epoch_ns
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{stamp}.{digits}Z" if digits else f"{stamp}Z"


def parse_keep_alive(value: Any) -> int:
    """Return a ``keep_alive`` in nanoseconds, as ``api.Duration.UnmarshalJSON`` reads it.

    Numbers are seconds, strings are Go durations (``"5m"``, ``"1h30m"``, ``"0"``); anything
    negative means forever. Raises ``ValueError`` with Go's message for what Go rejects.
    """
    if value is None:
        return DEFAULT_KEEP_ALIVE_NS
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        kind = {bool: "bool", list: "[]interface {}", dict: "map[string]interface {}"}.get(
            type(value), type(value).__name__
        )
        raise ValueError(f"Unsupported type: '{kind}'")
    if isinstance(value, int | float):
        return FOREVER_NS if value < 0 else int(value * 1_000_000_000)
    return _parse_go_duration(value)


def _parse_go_duration(text: str) -> int:
    invalid = ValueError(f'time: invalid duration "{text}"')
    body = text.lstrip("+-")
    negative = text.startswith("-")
    if body == "0":
        return 0
    if not body:
        raise invalid
    total, position = 0.0, 0
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        if match is None:
            raise invalid
        total += float(match.group(1)) * _GO_DURATION_UNITS[match.group(2)]
        position = match.end()
    return FOREVER_NS if negative else int(total)


def estimate_prompt_tokens(messages: list[Any]) -> int:
    """A deterministic stand-in for the tokenizer: ~4 characters a token, 4 tokens a turn."""
    tokens = 3
    for message in messages:
        content = message.get("content", "") if isinstance(message, dict) else ""
        tokens += 4 + len(content if isinstance(content, str) else "") // 4
    return tokens


#: Synthetic CPU timings (nanoseconds) used to build the final chunk's metrics.
COLD_LOAD_NS = 1_204_312_500
WARM_LOAD_NS = 12_583_417
PROMPT_NS_PER_TOKEN = 1_503_125
EVAL_NS_PER_TOKEN = 41_718_750
OVERHEAD_NS = 2_416_666


def final_metrics(*, prompt_tokens: int, eval_count: int, cold: bool) -> dict[str, int]:
    """The metrics of a final chunk, in Ollama's order, with zeros omitted like ``omitempty``.

    One streamed chunk counts as one generated token, so ``eval_count`` is the number of content
    chunks; durations follow the ``*_NS*`` constants above and always add up:
    ``total_duration = load_duration + prompt_eval_duration + eval_duration + OVERHEAD_NS``.
    """
    load = COLD_LOAD_NS if cold else WARM_LOAD_NS
    prompt_ns = prompt_tokens * PROMPT_NS_PER_TOKEN
    eval_ns = eval_count * EVAL_NS_PER_TOKEN
    metrics = {
        "total_duration": load + prompt_ns + eval_ns + OVERHEAD_NS,
        "load_duration": load,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": prompt_ns,
        "eval_count": eval_count,
        "eval_duration": eval_ns,
    }
    return {key: value for key, value in metrics.items() if value}


def normalise_model_name(name: str) -> str:
    """``qwen2.5`` → ``qwen2.5:latest``; Ollama compares names case-insensitively."""
    last = name.rsplit("/", 1)[-1]
    full = name if ":" in last else f"{name}:latest"
    return full.lower()


@dataclass(frozen=True)
class ModelCard:
    """What the fake says about one installed model (derived from its name, deterministic)."""

    name: str
    family: str
    parameter_size: str
    quantization_level: str
    size: int
    digest: str
    context_length: int
    modified_at: str

    @classmethod
    def for_name(cls, name: str) -> ModelCard:
        """Derive a plausible card: ``qwen2.5:0.5b-instruct`` → family ``qwen2``, ``0.5B``."""
        full = name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"
        base, tag = full.rsplit(":", 1)
        stem = base.rsplit("/", 1)[-1].lower()
        family = re.sub(r"[^a-z]+$", "", re.sub(r"\.\d+$", "", stem)) or stem
        if stem.startswith("qwen2"):
            family = "qwen2"
        elif stem.startswith(("llama", "smollm")):
            family = "llama"
        size_match = re.search(r"(\d+(?:\.\d+)?)([bm])", f"{tag}-{stem}")
        params = f"{size_match.group(1)}{size_match.group(2).upper()}" if size_match else "7.6B"
        scale = 1e9 if params.endswith("B") else 1e6
        size = int(float(params[:-1]) * scale * 0.8) + 8_388_608
        digest = hashlib.sha256(full.encode("utf-8")).hexdigest()
        return cls(full, family, params, "Q4_K_M", size, digest, 32_768, "2025-01-15T09:30:00Z")

    def details(self) -> dict[str, Any]:
        """``api.ModelDetails``."""
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }

    def tags_entry(self) -> dict[str, Any]:
        """One entry of ``GET /api/tags`` (``api.ListModelResponse``)."""
        return {
            "name": self.name,
            "model": self.name,
            "modified_at": self.modified_at,
            "size": self.size,
            "digest": self.digest,
            "details": self.details(),
        }

    def ps_entry(self, expires_at_ns: int) -> dict[str, Any]:
        """One entry of ``GET /api/ps`` (``api.ProcessModelResponse``); a CPU box: no VRAM."""
        return {
            "name": self.name,
            "model": self.name,
            "size": self.size + 268_435_456,
            "digest": self.digest,
            "details": self.details(),
            "expires_at": go_time(expires_at_ns),
            "size_vram": 0,
            "context_length": 4096,
        }

    def show_body(self, *, thinking: bool) -> dict[str, Any]:
        """``POST /api/show`` (``api.ShowResponse``) for this model."""
        template = (
            "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n"
            "{{ end }}<|im_start|>assistant\n"
        )
        parameters = "\n".join(f'stop{" " * 27}"{stop}"' for stop in ("<|im_start|>", "<|im_end|>"))
        modelfile = (
            '# Modelfile generated by "ollama show"\n'
            "# To build a new Modelfile based on this one, replace the FROM line with:\n"
            f"# FROM {self.name}\n\n"
            f"FROM /root/.ollama/models/blobs/sha256-{self.digest}\n"
            f'TEMPLATE """{template}"""\n'
            'PARAMETER stop "<|im_start|>"\nPARAMETER stop "<|im_end|>"\n'
        )
        arch = self.family
        capabilities = ["completion", "tools"] + (["thinking"] if thinking else [])
        return {
            "modelfile": modelfile,
            "parameters": parameters,
            "template": template,
            "details": self.details(),
            "model_info": {
                "general.architecture": arch,
                "general.file_type": 15,
                "general.parameter_count": int(self.size / 0.8),
                "general.quantization_version": 2,
                f"{arch}.context_length": self.context_length,
                f"{arch}.embedding_length": 896,
                f"{arch}.block_count": 24,
                "tokenizer.ggml.model": "gpt2",
            },
            "capabilities": capabilities,
            "modified_at": self.modified_at,
        }
