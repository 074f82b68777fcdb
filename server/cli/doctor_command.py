"""``nuisances doctor``: does the configured model work, and if not, exactly why."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer
from rich.console import Console

from llm.policy import decide, effective_class
from llm.prompting import build_payload
from llm.turn import Delta, TurnRequest, TurnResult, chat_turn
from server.db.migrate import upgrade
from server.services import Services
from server.settings import SettingsError, load_settings

console = Console(highlight=False, soft_wrap=True)
PROBE = "Bonjour, mon voisin fait du bruit tard le soir. Que puis-je faire d'abord ?"


def _line(ok: bool | None, name: str, detail: str) -> None:
    mark = {True: "[green]ok  [/green]", False: "[red]FAIL[/red]", None: "[yellow]warn[/yellow]"}[
        ok
    ]
    console.print(f"{mark} {name:<16} {detail}")


async def _diagnose(probe: bool) -> str:
    settings = load_settings()
    upgrade(settings.database_url)
    provider = settings.provider
    services = Services.build(settings)
    services.assistant.quota_counter = None  # a probe is not a person's turn
    try:
        _line(True, "settings", f"{provider.type} {provider.model} at {provider.base_url}")
        if provider.type == "none":
            _line(None, "provider", "none: every turn answers with the fallback")
            return "DISABLED"
        kind, why = effective_class(provider, settings.policy)
        decision = decide(provider, build_payload(PROBE).elements, settings.policy)
        _line(decision.allowed, "flow policy", f"{kind}; " + "; ".join(decision.reasons or [why]))
        started = time.perf_counter()
        health = await services.provider.health()
        _line(health.reachable, "reachable", health.checks.get("reachable", health.detail))
        _line(health.model_present, "model present", health.checks.get("model_present", "-"))
        loaded = health.checks.get("model_loaded", "unknown")
        _line(None if health.model_loaded is not True else True, "model loaded", loaded)
        _line(True, "health time", f"{(time.perf_counter() - started) * 1000:.0f} ms")
        if not probe:
            return "LLM_OK" if health.ok and decision.allowed else "FALLBACK_PROVIDER"
        result: TurnResult | None = None
        async for event in chat_turn(services.assistant, TurnRequest(PROBE, request_id="doctor")):
            if not isinstance(event, Delta):
                result = event
        assert result is not None  # noqa: S101 - chat_turn always ends with a result
        timings = result.timings
        _line(
            result.status == "ok",
            "probe answer",
            f"{result.source}/{result.status}; first token {timings.first_token_ms} ms, "
            f"total {timings.total_ms} ms, {timings.tokens} tokens, "
            f"{timings.tokens_per_second} tok/s",
        )
        if result.source == "llm" and result.status == "ok":
            return "LLM_OK"
        last = services.assistant.harness.audit.last(1)
        reason = (
            (result.error or {}).get("reason") or (last[0].get("error") or {}).get("reason")
            if last
            else None
        )
        if last and last[0].get("validation"):
            reason = "; ".join(last[0]["validation"])
        if result.status == "blocked_policy":
            reason = decision.reasons[-1]
        verdict = {
            "blocked_policy": "FALLBACK_POLICY",
            "invalid_output": "FALLBACK_INVALID_OUTPUT",
        }.get(result.status, "FALLBACK_PROVIDER")
        return f"{verdict} ({reason or result.status})"
    finally:
        await services.stop()


def doctor(
    probe: Annotated[bool, typer.Option(help="Send one probe message through the harness.")] = True,
) -> None:
    """Check the configured model end to end; one line per check, then a verdict."""
    try:
        verdict = asyncio.run(_diagnose(probe))
    except SettingsError as exc:
        console.print(str(exc), style="red", markup=False)
        raise typer.Exit(2) from exc
    style = "bold green" if verdict == "LLM_OK" else "bold red"
    console.print(f"verdict: {verdict}", style=style, markup=False)
    if verdict != "LLM_OK":
        raise typer.Exit(1)
