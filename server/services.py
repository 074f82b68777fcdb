"""The long-lived parts of the running service, built once from the settings.

``Services`` owns the database engine, the directory snapshot, the model assistant (provider,
budgets, slots, quotas), the metrics registry and the in-flight turn registry. The lifespan of
the app starts its background tasks (migrations, directory reload, warm-up, model health) and
stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from directory.contact import Contact
from directory.snapshot import Directory, DirectoryStore
from llm.admission import Quotas, Slots
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
from server.metrics import Metrics
from server.settings import Settings

__all__ = ["Services"]

log = logging.getLogger("nuisances.services")


class _StoredQuota:
    """Quota counts from the stored turns (``llm.admission.QuotaCounter``)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    async def today(self, device_id: str | None) -> tuple[int, int]:
        def count() -> tuple[int, int]:
            with self._sessions() as session:
                return repository.quota_counts(session, device_id)

        return await asyncio.to_thread(count)


@dataclass
class Services:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    directory: DirectoryStore
    provider: Provider
    assistant: Assistant
    metrics: Metrics
    in_flight: dict[tuple[str, str], asyncio.Future[None]] = field(default_factory=dict)
    model_health: Health | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # Detection runs off the event loop, in threads of its own: it never queues behind
    # storage calls in the default executor, so the card never waits for the database.
    _detector: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="detect")
    )

    async def detect(self, text: str) -> Detection:
        """``safety.detect`` in the detector's threads (it never raises)."""
        return await asyncio.get_running_loop().run_in_executor(self._detector, detect, text)

    @classmethod
    def build(cls, settings: Settings, provider: Provider | None = None) -> Services:
        engine = make_engine(settings.database_url)
        sessions = make_session_factory(engine)
        store = DirectoryStore()
        chosen = provider or build_provider(settings.provider, settings.budgets)
        slots = Slots(
            parallel=settings.provider.parallel,
            max_waiting=settings.admission.max_waiting,
            wait_s=settings.admission.wait_s,
        )
        assistant = Assistant(
            provider=chosen,
            budgets=settings.budgets,
            book=lambda: store.snapshot,
            prompt_contacts=lambda category, topics: _prompt_contacts(
                store.snapshot, category, topics
            ),
            slots=slots,
            quotas=Quotas(settings.admission.quota_per_device, settings.admission.quota_global),
            quota_counter=_StoredQuota(sessions),
            options=ChatOptions(num_predict=settings.budgets.num_predict),
            harness=_harness(settings, sessions),
            style=settings.contact_style,
        )
        return cls(
            settings=settings,
            engine=engine,
            sessions=sessions,
            directory=store,
            provider=chosen,
            assistant=assistant,
            metrics=Metrics(queue_depth=lambda: slots.waiting),
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

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        with contextlib.suppress(Exception):
            await self.provider.aclose()
        self.assistant.harness.audit.close()
        self.engine.dispose()
        self._detector.shutdown(wait=False)

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
        try:
            health = await self.provider.health()
        except Exception as exc:
            health = Health(
                self.settings.provider.name,
                self.settings.provider.model,
                False,
                False,
                None,
                detail=type(exc).__name__,
            )
        self.model_health = health
        self.metrics.model_up.set(1 if health.ok else 0)
        return health

    def database_ok(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return True
        except Exception:
            return False


def _harness(settings: Settings, sessions: sessionmaker[Session]) -> Harness:
    data = settings.data_dir
    cache = None
    if settings.cache_ttl_s > 0:
        try:
            cache = AnswerCache(SqlCacheStore(sessions), cache_secret(data), settings.cache_ttl_s)
        except OSError as exc:  # no writable data dir: no cache rather than no service
            log.warning("answer cache disabled", extra={"error": type(exc).__name__})
    try:
        audit = AuditLog(
            data / "audit" / "audit.jsonl", settings.audit_max_bytes, settings.audit_backups
        )
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
