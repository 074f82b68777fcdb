"""Plant identifiers, run turns (one of them during a database outage), erase, then grep.

What it does, in process, against a real database (SQLite file by default) and the fake
Ollama (a real HTTP server) answering in kind:

1. Sends messages full of identifiers a person would write (names with and without civility,
   a street with and without a number, flat and building, e-mails plain and spelled out, a
   phone number, a pasted access token) in one conversation, and a control message (no
   identifier, one unique marker word) in another.
2. Cuts the database for one turn (the turn goes to the spool), brings it back, lets the spool
   replay.
3. Erases the conversation with the identifiers (``DELETE /v1/conversations/{id}``).
4. Reads every file the service wrote: the audit log and its backups, the spool, the SQLite
   database with its -wal and -shm files; counts each planted value (case-insensitive, UTF-8),
   and checks the control marker is still found in the database (so the search could fail).

Prints one line per file and value found, and a verdict; exits 1 when a planted value is found
anywhere. ``tests/server/test_privacy_files.py`` runs it.

    .venv/bin/python scripts/privacy_check.py [--database-url URL] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm.config import Budgets, ProviderConfig
from server.db import repository
from server.db.migrate import upgrade
from server.db.session import make_engine, make_session_factory
from server.main import create_app
from server.settings import Settings
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama, unused_port_url

# Each message plants identifiers; the model echoes some of them back, as models do.
MESSAGES = (
    "Sandrine Lebreton au 12 rue de la Paix met la musique à fond toutes les nuits.",
    "Je vis chez les Nguyen, bâtiment B appartement 34, et Mme de La Tourette tape au plafond.",
    "Écrivez-moi : marie arobase example point fr ou marie.dupont@example.fr, "
    "ou au 06 12 34 56 78.",
    "Mon jeton est nui_Zk3vQ9pL2xYw8RtBn5Mc7Hs4 si besoin. Le gardien Hervé Kermarrec a vu.",
    "Les Nguyen du bâtiment B ont encore crié, rue de la Paix, vers minuit.",
)
ECHO = "Vous dites que Sandrine Lebreton et les Nguyen font du bruit : notez chaque épisode."
# What must be found nowhere (case-insensitive): whole values, and the parts that identify.
PLANTED = (
    "Sandrine", "Lebreton", "Nguyen", "Tourette", "rue de la Paix", "appartement 34",
    "bâtiment B", "marie arobase", "example point fr", "marie.dupont", "06 12 34 56 78",
    "12 34 56 78", "nui_Zk3vQ9pL2xYw8RtBn5Mc7Hs4", "Kermarrec", "Hervé",
)  # fmt: skip
CONTROL_MARKER = "xylophonique"
CONTROL = f"Le voisin du dessus joue du {CONTROL_MARKER} la nuit, que faire ?"


@dataclass
class Finding:
    files: dict[str, dict[str, int]] = field(default_factory=dict)  # file -> value -> count
    # The audit log and the spool before the erasure: the audit's own scan must have kept
    # every identifier out already (the erasure then drops the conversation's lines).
    before_erasure: dict[str, dict[str, int]] = field(default_factory=dict)
    audit_lines_before: int = 0
    control_found: bool = False
    spooled: int = 0

    @property
    def leaks(self) -> int:
        return sum(
            sum(values.values())
            for found in (self.files, self.before_erasure)
            for values in found.values()
        )


def _scan(paths: list[Path]) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for path in paths:
        if not path.is_file():
            continue
        data = path.read_bytes().lower()
        hits = {
            value: data.count(value.lower().encode("utf-8"))
            for value in PLANTED
            if value.lower().encode("utf-8") in data
        }
        if hits:
            found[str(path)] = hits
    return found


def _written(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


async def run(database_url: str, data_dir: Path, model_url: str) -> Finding:
    settings = Settings(
        database_url=database_url,
        provider=ProviderConfig(base_url=model_url, model=DEFAULT_MODEL),
        budgets=Budgets(connect_s=1, first_token_s=2, idle_s=1, total_s=5, retries=0),
        warm_up=False,
        health_interval_s=3600,
        data_dir=data_dir,
    )
    upgrade(database_url)
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        token = repository.create_device(session, "privacy check")[1]
    engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    app = create_app(settings)
    finding = Finding()
    async with app.router.lifespan_context(app):
        services = app.state.services
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:

            async def send(text: str, message_id: str, conversation: str) -> None:
                body = {
                    "conversation_id": conversation,
                    "client_message_id": message_id,
                    "message": text,
                }
                response = await http.post("/v1/chat", json=body, headers=headers)
                response.raise_for_status()

            await send(CONTROL, "control-1", "conv-control")
            for number, text in enumerate(MESSAGES[:-1]):
                await send(text, f"m{number}", "conv-planted")
            live = services.sessions  # the database goes away for one turn
            dead = make_engine(unused_port_url().replace("http://", "postgresql+psycopg://u@"))
            services.sessions = make_session_factory(dead)
            await send(MESSAGES[-1], "m-outage", "conv-planted")
            finding.spooled = services.spool.size()
            finding.before_erasure = _scan(_written(data_dir))
            services.sessions = live
            await services.maintain()
            audit = services.assistant.harness.audit
            finding.audit_lines_before = sum(
                len(p.read_text(encoding="utf-8").splitlines()) for p in audit.files()
            )
            erased = await http.delete("/v1/conversations/conv-planted", headers=headers)
            erased.raise_for_status()
    files = _written(data_dir)
    if database_url.startswith("sqlite:///"):
        db = Path(database_url.removeprefix("sqlite:///"))
        files += [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
        finding.control_found = any(
            CONTROL_MARKER.encode() in p.read_bytes() for p in files[-3:] if p.is_file()
        )
    finding.files = _scan(files)
    return finding


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--keep", type=Path, default=None, help="folder for the files")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="privacy-check-"))
    url = args.database_url or f"sqlite:///{folder / 'nuisances.db'}"
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as fake:
        fake.enqueue(Behaviour.normal("Notez les horaires dans le journal."))  # the control
        for _ in MESSAGES:
            fake.enqueue(Behaviour.normal(ECHO))
        finding = asyncio.run(run(url, folder / "data", fake.url))
    print(f"files written under {folder}; {finding.spooled} bytes spooled during the outage")
    print(f"audit lines before the erasure: {finding.audit_lines_before}")
    for when, found in (("before erasure", finding.before_erasure), ("after", finding.files)):
        for path, values in found.items():
            for value, count in values.items():
                print(f"  FOUND ({when}) {count}x {value!r} in {path}")
    if url.startswith("sqlite"):
        print(f"control marker still in the database: {finding.control_found}")
    print(f"planted values found: {finding.leaks}")
    return 1 if finding.leaks or (url.startswith("sqlite") and not finding.control_found) else 0


if __name__ == "__main__":
    sys.exit(main())
