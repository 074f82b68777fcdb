"""The long-lived parts of the running service, built once from the settings.

``Services`` owns the database engine, the directory snapshot, the model assistant (provider,
budgets, slots, quotas), the metrics registry, the in-flight turn registry, the token cache,
the keyed hashes and the outage spool. The lifespan of the app starts its background tasks
(directory reload, warm-up, model health, spool replay and recovery, token refresh) and stops
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from prometheus_client import multiprocess
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from directory.contact import Contact
from directory.snapshot import Directory, DirectoryStore
from llm.admission import LocalSlots, Quotas, Slots
from llm.audit import AuditLog
from llm.cache import AnswerCache
from llm.prompting import PromptContact
from llm.providers import Provider, build_provider
from llm.turn import Assistant, Harness
from llm.types import ChatOptions, Health
from llm.validate import OutputContract
from safety import Detection, detect
from server.cache_store import SqlCacheStore, cache_secret
from server.db import repository
from server.db.session import make_engine, make_session_factory
from server.logs import flush_suppressed
from server.metrics import Metrics, multiprocess_dir
from server.pg_slots import PgSlots
from server.privacy import Tags
from server.settings import Settings
from server.spool import Spool
from server.token_cache import TokenCache
from server.turn_gate import TurnGate

__all__ = ["InFlight", "Outage", "Services"]

log = logging.getLogger("nuisances.services")


@dataclass
class InFlight:
    """A turn this process is running: its message's digest, and a future that gets its
    response (None when it ended without one)."""

    digest: str
    future: asyncio.Future[dict[str, Any] | None]
    turn_id: int | None = None  # its row, once claimed (its lease is renewed meanwhile)


@dataclass
class Outage:
    """What stands in for the database while it is away, in this process.

    ``answered``: turns answered and spooled but not yet replayed (key -> digest, response), so
    that a retry replays them. Quotas go on from the last counts the database gave for each
    device, plus what was admitted since.
    """

    answered: dict[repository.TurnKey, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    known_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    day: date | None = None

    def counts(self, device_id: str) -> tuple[int, int]:
        """Quota counts for a turn admitted without the database (and count it)."""
        today = datetime.now(UTC).date()
        if self.day != today:
            self.day, self.admitted, self.known_counts = today, {}, {}
        mine, everyone = self.known_counts.get(device_id, (0, 0))
        before = (mine + self.admitted.get(device_id, 0), everyone + self.admitted.get("*", 0))
        self.admitted[device_id] = self.admitted.get(device_id, 0) + 1
        self.admitted["*"] = self.admitted.get("*", 0) + 1
        return before


@dataclass
class Services:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    directory: DirectoryStore
    provider: Provider
    assistant: Assistant
    metrics: Metrics
    tags: Tags
    spool: Spool
    tokens: TokenCache
    in_flight: dict[repository.TurnKey, InFlight] = field(default_factory=dict)
    outage: Outage = field(default_factory=Outage)
    model_health: Health | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # Detection runs off the event loop, in threads of its own: it never queues behind
    # storage calls in the default executor, so the card never waits for the database.
    _detector: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="detect")
    )

    # A few turns of this process at once past their card (server.turn_gate).
    gate: TurnGate = field(default_factory=TurnGate)
    # Storage calls run in a few threads of their own: a turn's claim and store wait in this
    # queue, not for the interpreter against many threads, and never in front of the card.
    _storage: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4, thread_name_prefix="storage")
    )

    async def stored(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(session, *args, **kwargs)`` in a session, in the storage threads."""
        call = functools.partial(self._call, function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._storage, call)

    async def detect(self, text: str) -> Detection:
        """``safety.detect`` in the detector's threads (it never raises)."""
        return await asyncio.get_running_loop().run_in_executor(self._detector, detect, text)

    @classmethod
    def build(cls, settings: Settings, provider: Provider | None = None) -> Services:
        engine = make_engine(settings.database_url)
        sessions = make_session_factory(engine)
        secret = cache_secret(
            settings.data_dir, settings.secret.get_secret_value() if settings.secret else None
        )
        store = DirectoryStore()
        endpoints = settings.provider.endpoints()
        if provider is None:
            servers = [
                build_provider(settings.provider.for_server(e), settings.budgets) for e in endpoints
            ]
        else:  # the tests' fake: one server
            servers, endpoints = [provider], endpoints[:1]
        chosen = servers[0]
        slots = _slots(settings, [(str(e.base_url), e.parallel) for e in endpoints])
        assistant = Assistant(
            provider=chosen,
            budgets=settings.budgets,
            book=lambda: store.snapshot,
            prompt_contacts=lambda category, topics: _prompt_contacts(
                store.snapshot, category, topics
            ),
            slots=slots,
            quotas=Quotas(settings.admission.quota_per_device, settings.admission.quota_global),
            options=ChatOptions(num_predict=settings.budgets.num_predict),
            harness=_harness(settings, sessions, secret),
            style=settings.contact_style,
            servers=servers if len(servers) > 1 else (),
        )
        return cls(
            settings=settings,
            engine=engine,
            sessions=sessions,
            directory=store,
            provider=chosen,
            assistant=assistant,
            metrics=Metrics(queue_depth=lambda: slots.waiting),
            tags=Tags(secret),
            spool=Spool(settings.data_dir / "spool", secret, settings.spool_max_bytes),
            tokens=TokenCache(settings.token_cache_max_age_s),
        )

    async def start(self) -> None:
        """Reload the directory and start the background tasks; never fails on the model."""
        try:
            await asyncio.to_thread(self.directory.reload, self.sessions)
        except Exception as exc:  # the national card is always there
            log.warning("directory reload failed at start-up", extra={"error": type(exc).__name__})
        self._tasks.append(
            asyncio.create_task(
                self.directory.watch(self.sessions, self.settings.directory_reload_s)
            )
        )
        self._tasks.append(asyncio.create_task(self._watch_model()))
        await self.maintain()  # a spool left by a crash goes in before the first request
        await self.refresh_tokens()  # known devices are checked in memory from the start
        self._tasks.append(asyncio.create_task(self._maintenance()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for server in self.assistant.servers or [self.provider]:
            with contextlib.suppress(Exception):
                await server.aclose()
        if isinstance(self.assistant.slots, PgSlots):
            with contextlib.suppress(Exception):
                await self.assistant.slots.close()
        self.assistant.harness.audit.close()
        self.engine.dispose()
        if multiprocess_dir() is not None:  # this worker's live gauges leave the sums
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
        self._detector.shutdown(wait=False)
        self._storage.shutdown(wait=False)

    async def _maintenance(self) -> None:
        """Replay the spool and recover abandoned turns when the database answers; re-check
        the cached tokens. Every ``spool_replay_s`` seconds; never raises."""
        last_refresh = 0.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.settings.spool_replay_s)
            self.metrics.sample()
            flush_suppressed()
            await self.maintain()
            if loop.time() - last_refresh >= self.settings.token_refresh_s:
                last_refresh = loop.time()
                await self.refresh_tokens()

    async def maintain(self) -> None:
        """One round: renew the leases of the turns running here, replay what the spool
        holds, and mark failed the turns left running past their lease (by a crash or an
        outage), so that their retries take them over at once. Never raises."""
        running = [f.turn_id for f in self.in_flight.values() if f.turn_id is not None]

        def round_trip() -> tuple[int, int]:
            if running:
                self._call(repository.renew_leases, running, self.settings.turn_lease_s)
            replayed = self.spool.replay(self.restore) if self.spool.size() else 0
            # Erasures served by another process or machine reach this machine's audit files.
            self.assistant.harness.audit.apply_erasures(
                lambda last: self._call(repository.erasures_after, last)
            )
            return replayed, self._call(repository.recover_turns)

        try:
            replayed, recovered = await asyncio.to_thread(round_trip)
        except Exception as exc:
            if self.spool.size():
                log.warning("database still unavailable", extra={"error": type(exc).__name__})
            return
        if replayed:
            log.info("spooled turns stored", extra={"turns": replayed})
        if recovered:
            log.warning("turns left running marked failed", extra={"turns": recovered})

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        with self.sessions() as session:
            return function(session, *args, **kwargs)

    def restore(self, records: list[dict[str, Any]]) -> None:
        """Write spooled turns into the database in one transaction, in order."""
        with self.sessions() as session:
            for record in records:
                key = repository.TurnKey(**record["key"])
                repository.restore_turn(session, key, record["turn"])
                if record.get("admitted"):
                    repository.count_usage(session, record["day"], key.device_id, 1)
            session.commit()
        for record in records:
            self.outage.answered.pop(repository.TurnKey(**record["key"]), None)

    def spooled(self, key: repository.TurnKey, digest: str, record: dict[str, Any]) -> bool:
        """Keep a turn answered without the database: spooled, and remembered for retries."""
        try:
            kept = self.spool.append(record)
        except OSError as exc:
            log.error("could not spool a turn", extra={"error": type(exc).__name__})
            kept = False
        if not kept:
            log.error("spool full or unwritable: a turn is answered but not kept")
            self.metrics.spool_lost.inc()
        self.outage.answered[key] = (digest, record["turn"]["response"])
        return kept

    def forget_conversation(self, device_id: str, conversation_id: str) -> None:
        """An erasure: nothing of the conversation stays in memory for retries to replay."""
        for key in [k for k in self.outage.answered if k.device_id == device_id]:
            if key.conversation_id == conversation_id:
                del self.outage.answered[key]

    async def refresh_tokens(self) -> None:
        """Load every valid token key (up to the cache's bound) and re-check the cached ones:
        a device's first request after a restart, or after its token was made by another
        process, is checked in memory too; a revoked one is dropped."""
        keys = self.tokens.keys()
        bound = self.tokens.max_entries

        def load() -> dict[str, str]:
            with self.sessions() as session:
                valid = repository.active_tokens(session, bound)
                missing = [k for k in keys if k not in valid]
                if missing and len(valid) >= bound:  # more devices than the bound
                    valid.update(repository.valid_devices(session, missing))
                return valid

        try:
            valid = await asyncio.to_thread(load)
        except Exception:
            return  # entries age out on their own while the database is away
        self.tokens.refreshed(keys, valid)
        self.tokens.preload(valid)

    async def _watch_model(self) -> None:
        """Warm the model up once, then check its health periodically (metrics, /readyz)."""
        if self.settings.warm_up and self.settings.provider.type != "none":
            try:
                await self.provider.warm_up()
                log.info("model warmed up", extra={"model": self.settings.provider.model})
            except Exception as exc:
                log.warning(
                    "model warm-up failed",
                    extra={"error": type(exc).__name__, "reason": getattr(exc, "reason", None)},
                )
        while True:
            await self.check_model()
            await asyncio.sleep(self.settings.health_interval_s)

    async def check_model(self) -> Health:
        """Ask every model server; each one's answer marks it up or down for the slots. The
        health reported is the first server's that is up (or the first's)."""
        found: list[Health] = []
        for number, server in enumerate(self.assistant.servers or [self.provider]):
            try:
                health = await server.health()
            except Exception as exc:
                health = Health(
                    self.settings.provider.name,
                    self.settings.provider.model,
                    False,
                    False,
                    None,
                    detail=type(exc).__name__,
                )
            self.assistant.slots.mark(number, health.ok)
            found.append(health)
        chosen = next((h for h in found if h.ok), found[0])
        self.model_health = chosen
        self.metrics.model_up.set(1 if chosen.ok else 0)
        return chosen

    def database_ok(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return True
        except Exception:
            return False


def _slots(settings: Settings, servers: list[tuple[str, int]]) -> Slots:
    """Slots shared through PostgreSQL when the database is PostgreSQL (several processes
    may serve), else counted in this one process (SQLite: one process)."""
    admission = settings.admission
    if settings.database_url.startswith("postgresql"):
        return PgSlots(
            settings.database_url,
            servers,
            max_waiting=admission.max_waiting,
            wait_s=admission.wait_s,
            device_waiting=admission.device_waiting,
        )
    return LocalSlots(
        [parallel for _, parallel in servers],
        max_waiting=admission.max_waiting,
        wait_s=admission.wait_s,
        device_waiting=admission.device_waiting,
    )


def _harness(settings: Settings, sessions: sessionmaker[Session], secret: bytes) -> Harness:
    cache = None
    if settings.cache_ttl_s > 0:
        try:
            cache = AnswerCache(SqlCacheStore(sessions), secret, settings.cache_ttl_s)
        except OSError as exc:  # no writable data dir: no cache rather than no service
            log.warning("answer cache disabled", extra={"error": type(exc).__name__})
    try:
        audit = AuditLog(settings.audit_path, settings.audit_max_bytes, settings.audit_backups)
    except OSError as exc:
        log.warning("audit log unavailable", extra={"error": type(exc).__name__})
        audit = AuditLog(None)
    return Harness(
        policy=settings.policy,
        pseudonymize=settings.pseudonymize,
        contract=OutputContract(max_chars=settings.answer_max_chars),
        cache=cache,
        audit=audit,
    )


def _prompt_contacts(
    snapshot: Directory, category: str, topics: Sequence[str]
) -> list[PromptContact]:
    """The card's contacts first, then the other national ones: ids and names, no numbers."""
    card = snapshot.card_for([category] if category != "rien" else [], topics)
    ordered: list[Contact] = [*card, *(c for c in snapshot.contacts if c.region is None)]
    seen: set[str] = set()
    found = []
    for contact in ordered:
        if contact.id not in seen:
            seen.add(contact.id)
            found.append(PromptContact(contact.id, contact.name, contact.description))
    return found
