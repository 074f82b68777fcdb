"""``bench run``: every scenario through the real assistant, answers recorded as they come.

Two targets: the app in-process (settings from the environment, ``create_app``, driven over
``httpx.ASGITransport`` inside its lifespan, with a device token created in the configured
database), or a running server (``--url`` and a token). Each scenario is played ``repeat``
times, each play in a fresh conversation; an interrupted run resumes where it stopped (the
scenario and repeat already recorded are not played again).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.client import CHAT_TIMEOUT, chat_turn
from bench.identity import ollama_digest
from bench.records import AnswerRecord, DirectoryEntry, RunDir, RunManifest, TargetInfo
from bench.scenario import Scenario, scenarios_digest
from llm.providers.base import Provider
from server.db import repository
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import Settings

__all__ = ["RunMismatch", "Target", "in_process_target", "run_bench", "url_target"]


class RunMismatch(RuntimeError):
    """The run directory holds another scenario set or repeat count: refuse to mix them."""


@dataclass
class Target:
    http: httpx.AsyncClient
    token: str
    info: TargetInfo


def bench_settings(settings: Settings) -> Settings:
    """The settings with the daily quotas lifted: a quota fallback would grade the policy."""
    admission = settings.admission.model_copy(
        update={"quota_per_device": None, "quota_global": None}
    )
    return settings.model_copy(update={"admission": admission})


def _create_token(database_url: str) -> str:
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            return repository.create_device(session, "bench")[1]
    finally:
        engine.dispose()


@contextlib.asynccontextmanager
async def in_process_target(
    settings: Settings, provider: Provider | None = None
) -> AsyncIterator[Target]:
    """The app in this process, its lifespan running, with a new device token."""
    chosen = bench_settings(settings)
    app = create_app(chosen, provider=provider)
    config = chosen.provider
    digest = None
    if config.type == "ollama":
        digest = await ollama_digest(str(config.base_url), config.model)
    info = TargetInfo(
        mode="in_process",
        provider_type=config.type,
        base_url=str(config.base_url),
        model=config.model,
        digest=digest,
    )
    async with app.router.lifespan_context(app):
        token = await asyncio.to_thread(_create_token, chosen.database_url)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            yield Target(http, token, info)


@contextlib.asynccontextmanager
async def url_target(url: str, token: str) -> AsyncIterator[Target]:
    """A running server; ``/readyz`` tells which provider and model it uses."""
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=CHAT_TIMEOUT) as http:
        provider_type = model = None
        with contextlib.suppress(httpx.HTTPError, ValueError, AttributeError):
            checks = (await http.get("/readyz")).json().get("checks", {})
            provider_type, model = checks.get("provider"), checks.get("model")
        info = TargetInfo(mode="url", url=url, provider_type=provider_type, model=model)
        yield Target(http, token, info)


async def _directory(target: Target) -> list[DirectoryEntry]:
    headers = {"Authorization": f"Bearer {target.token}"}
    response = await target.http.get("/v1/directory", headers=headers)
    response.raise_for_status()
    return [DirectoryEntry(id=c["id"], name=c["name"], number=c["number"]) for c in response.json()]


async def play(target: Target, scenario: Scenario, repeat: int) -> AnswerRecord:
    """One scenario once, in a fresh conversation; the turns in order."""
    conversation = f"bench-{uuid.uuid4().hex[:12]}-r{repeat}"
    record = AnswerRecord(
        scenario_id=scenario.id,
        repeat=repeat,
        conversation_id=conversation,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        turns=[],
    )
    for index, message in enumerate(scenario.turns):
        turn = await chat_turn(
            target.http,
            target.token,
            conversation_id=conversation,
            client_message_id=f"{conversation}-t{index}",
            message=message,
            region=scenario.region,
        )
        record.turns.append(turn)
        if turn.response is None:
            break  # the conversation cannot go on without this answer
    return record


def _manifest(
    run_dir: RunDir,
    target: Target,
    scenarios: Sequence[Scenario],
    repeat: int,
    directory: list[DirectoryEntry],
) -> RunManifest:
    digest = scenarios_digest(scenarios)
    if run_dir.exists():
        previous = run_dir.manifest()
        if previous.scenarios_digest != digest or previous.repeat != repeat:
            raise RunMismatch(
                f"{run_dir.path} holds another run (scenarios {previous.scenarios_digest}, "
                f"repeat {previous.repeat}); choose another --out"
            )
        return previous.model_copy(update={"target": target.info, "directory": directory})
    return RunManifest(
        run_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        target=target.info,
        scenarios_digest=digest,
        scenario_ids=[s.id for s in scenarios],
        repeat=repeat,
        directory=directory,
    )


async def run_bench(
    target: Target,
    scenarios: Sequence[Scenario],
    run_dir: RunDir,
    *,
    repeat: int = 1,
    console: Console | None = None,
    on_answer: Callable[[AnswerRecord], None] | None = None,
) -> RunManifest:
    """Play what is not recorded yet; the manifest, updated, at the end."""
    started = time.perf_counter()
    manifest = _manifest(run_dir, target, scenarios, repeat, await _directory(target))
    run_dir.write_manifest(manifest)
    run_dir.write_scenarios(list(scenarios))
    done = {record.key for record in run_dir.answers() if record.final.response is not None}
    todo = [(s, r) for r in range(repeat) for s in scenarios if (s.id, r) not in done]
    tally = {"llm": 0, "fallback": 0, "other": 0, "no answer": 0}
    progress = Progress(
        TextColumn("[bold]answers"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        disable=console is None,
    )
    with progress:
        task = progress.add_task("", total=len(todo))
        for scenario, index in todo:
            record = await play(target, scenario, index)
            run_dir.append_answer(record)
            response = record.final.response
            source = "no answer" if response is None else response.source
            tally[source if source in tally else "other"] += 1
            progress.update(
                task, advance=1, description=" · ".join(f"{k} {v}" for k, v in tally.items())
            )
            if on_answer is not None:
                on_answer(record)
    manifest = manifest.model_copy(
        update={
            "answers": len(run_dir.answers()),
            "wall_s": round((manifest.wall_s or 0.0) + time.perf_counter() - started, 2),
        }
    )
    run_dir.write_manifest(manifest)
    return manifest
