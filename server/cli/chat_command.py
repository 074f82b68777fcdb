"""``nuisances chat "message"``: one turn against a running server, streamed in the terminal."""

from __future__ import annotations

import json
import os
import uuid
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.panel import Panel

console = Console(highlight=False, soft_wrap=True)


def chat(
    message: Annotated[str, typer.Argument(help="What the person types.")],
    url: Annotated[str, typer.Option(help="The server.")] = "http://127.0.0.1:8000",
    token: Annotated[
        str | None, typer.Option(help="Bearer token (default: $NUISANCES_TOKEN).")
    ] = None,
    conversation: Annotated[str, typer.Option(help="Conversation id.")] = "cli",
    region: Annotated[str | None, typer.Option(help="Département code.")] = None,
) -> None:
    """Send one message; show the card, then the answer as it streams."""
    bearer = token or os.environ.get("NUISANCES_TOKEN")
    if not bearer:
        console.print("a token is needed: --token or NUISANCES_TOKEN", style="red")
        raise typer.Exit(2)
    body = {
        "conversation_id": conversation,
        "client_message_id": f"cli-{uuid.uuid4().hex[:12]}",
        "message": message,
        "region": region,
    }
    headers = {"Authorization": f"Bearer {bearer}", "Accept": "text/event-stream"}
    timeout = httpx.Timeout(connect=5.0, read=300.0, write=10.0, pool=5.0)
    try:
        with httpx.stream(
            "POST", f"{url}/v1/chat", json=body, headers=headers, timeout=timeout
        ) as r:
            if r.status_code != 200:
                r.read()
                console.print(f"HTTP {r.status_code}: {r.text}", style="red", markup=False)
                raise typer.Exit(1)
            _render(r.iter_lines())
    except httpx.HTTPError as exc:
        console.print(f"cannot reach {url}: {type(exc).__name__}", style="red")
        raise typer.Exit(1) from exc


def _render(lines: object) -> None:
    event = ""
    for line in lines:  # type: ignore[attr-defined]
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            if event == "safety" and data["card"]:
                card = "\n".join(f"{c['name']} : {c['number']}" for c in data["card"])
                console.print(
                    Panel(card, title=f"{data['category']} — numéros utiles", style="red")
                )
            elif event == "delta":
                console.print(data["text"], end="", markup=False)
            elif event == "done":
                if data.get("partial_discarded"):
                    console.print("\n" + data["text"], markup=False)
                console.print(f"\n[{data['source']} · {data['status']}]", style="dim", markup=False)
