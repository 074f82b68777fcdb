"""The guarded harness: policy table, pseudonymisation, leak-scan independence, cache, audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from directory.contact import Contact
from directory.snapshot import Directory
from llm.audit import AuditLog
from llm.cache import AnswerCache, CacheEntry
from llm.config import Budgets, ProviderConfig
from llm.leakscan import scan
from llm.payload import PayloadElement
from llm.policy import PolicyConfig, decide
from llm.prompting import PromptContact
from llm.providers import OllamaProvider
from llm.pseudonymize import PseudonymizeConfig, Pseudonymizer
from llm.turn import Assistant, Delta, Harness, TurnRequest, TurnResult, chat_turn
from llm.validate import validate
from tests.fakes import DEFAULT_MODEL, Behaviour, FakeOllama

BOOK = Directory.national_only()
ELEMENTS = (
    PayloadElement("system_prompt", "system", "prompt", "Tu es l'assistant."),
    PayloadElement("message", "user", "user_text", "<message>bonjour</message>"),
)
UNCLASSIFIED = (*ELEMENTS, PayloadElement("debug", "system", None, "x"))
WITH_METADATA = (*ELEMENTS, PayloadElement("device", "system", "metadata", "phone"))


def _provider(url: str, data_class: str = "local") -> ProviderConfig:
    return ProviderConfig(base_url=url, model="m", data_class=data_class)


ALLOW = PolicyConfig(allow_external=True)
NO_METADATA = PolicyConfig(
    allow_external=True, external_classes=frozenset({"prompt", "user_text", "pseudonym"})
)


@pytest.mark.parametrize(
    ("provider", "elements", "config", "allowed", "kind", "pseudonymise", "reason"),
    [
        pytest.param(
            _provider("http://127.0.0.1:11434"),
            ELEMENTS,
            PolicyConfig(),
            True,
            "local",
            False,
            "loopback",
            id="local, loopback: raw text",
        ),
        pytest.param(
            _provider("http://localhost:11434"),
            ELEMENTS,
            PolicyConfig(),
            True,
            "local",
            False,
            "loopback",
            id="local, localhost",
        ),
        pytest.param(
            _provider("http://[::1]:11434"),
            ELEMENTS,
            PolicyConfig(),
            True,
            "local",
            False,
            "loopback",
            id="local, IPv6 loopback",
        ),
        pytest.param(
            _provider("http://ollama:11434"),
            ELEMENTS,
            PolicyConfig(),
            True,
            "local",
            False,
            "trusted host ollama",
            id="local, compose service name",
        ),
        pytest.param(
            _provider("http://127.0.0.1:11434"),
            ELEMENTS,
            PolicyConfig(pseudonymise_local=True),
            True,
            "local",
            True,
            "pseudonymised",
            id="local, pseudonymised by choice",
        ),
        pytest.param(
            _provider("http://10.0.0.5:11434"),
            ELEMENTS,
            PolicyConfig(),
            False,
            "external",
            True,
            "neither loopback nor trusted",
            id="'local' on the LAN counts as external: refused",
        ),
        pytest.param(
            _provider("http://10.0.0.5:11434"),
            ELEMENTS,
            ALLOW,
            True,
            "external",
            True,
            "after pseudonymisation",
            id="'local' on the LAN, external allowed",
        ),
        pytest.param(
            _provider("https://api.example.com", "external"),
            ELEMENTS,
            PolicyConfig(),
            False,
            "external",
            True,
            "not allowed",
            id="external, not allowed",
        ),
        pytest.param(
            _provider("https://api.example.com", "external"),
            ELEMENTS,
            ALLOW,
            True,
            "external",
            True,
            "leak scan",
            id="external, allowed: pseudonymised and scanned",
        ),
        pytest.param(
            _provider("https://api.example.com", "external"),
            WITH_METADATA,
            NO_METADATA,
            False,
            "external",
            True,
            "metadata",
            id="external, a class it may not receive",
        ),
        pytest.param(
            _provider("http://127.0.0.1:11434"),
            UNCLASSIFIED,
            PolicyConfig(),
            False,
            "local",
            False,
            "unclassified elements: debug",
            id="unclassified element: closed by default",
        ),
        pytest.param(
            _provider("https://api.example.com", "external"),
            UNCLASSIFIED,
            ALLOW,
            False,
            "external",
            False,
            "unclassified",
            id="unclassified, even external allowed",
        ),
    ],
)
def test_policy_table(
    provider: ProviderConfig,
    elements: tuple[PayloadElement, ...],
    config: PolicyConfig,
    allowed: bool,
    kind: str,
    pseudonymise: bool,
    reason: str,
) -> None:
    decision = decide(provider, elements, config)
    assert decision.allowed is allowed
    assert decision.provider_class == kind
    if allowed:
        assert decision.pseudonymise is pseudonymise
        assert decision.leak_scan is (kind == "external")
    assert any(reason in r for r in decision.reasons), decision.reasons


@pytest.mark.parametrize(
    ("text", "token", "raw"),
    [
        pytest.param(
            "écrivez à paul.durand@mail.fr", "[courriel-1]", "paul.durand@mail.fr", id="e-mail"
        ),
        pytest.param("son portable 06 12 34 56 78", "[téléphone-1]", "06 12 34 56 78", id="phone"),
        pytest.param(
            "il habite 12 rue des Lilas", "[adresse-1]", "12 rue des Lilas", id="street address"
        ),
        pytest.param("Mme Dupont se plaint", "PERS-1", "Dupont", id="civility + name"),
        pytest.param("mon voisin Karim fait du bruit", "PERS-1", "Karim", id="'mon voisin X'"),
        pytest.param("la voiture AB-123-CD bloque", "[plaque-1]", "AB-123-CD", id="licence plate"),
        pytest.param(
            "IBAN FR76 3000 6000 0112 3456 7890 189",
            "[iban-1]",
            "FR76 3000 6000 0112 3456 7890 189",
            id="IBAN",
        ),
        pytest.param(
            "dossier 123456789012", "[identifiant-1]", "123456789012", id="long identifier"
        ),
    ],
)
def test_pseudonymisation_table(text: str, token: str, raw: str) -> None:
    pseudo = Pseudonymizer()
    out = pseudo.pseudonymize(text)
    assert token in out
    assert raw not in out


def test_a_name_seen_once_is_replaced_everywhere() -> None:
    pseudo = Pseudonymizer()
    out = pseudo.pseudonymize("M. Leroy crie. Ensuite Leroy claque la porte.")
    assert "Leroy" not in out
    assert out.count("PERS-1") == 2


NAMES = st.sampled_from(["Martin", "Nadia", "Jean-Paul", "Dubois", "Zoé", "Ibrahim", "Lefèvre"])
EMAILS = st.from_regex(r"[a-z]{3,8}\.[a-z]{3,8}@[a-z]{3,6}\.fr", fullmatch=True)
PLATES = st.from_regex(r"[A-HJ-NP-TV-Z]{2}-[0-9]{3}-[A-HJ-NP-TV-Z]{2}", fullmatch=True)


@given(NAMES, EMAILS, PLATES)
@settings(max_examples=150)
def test_pseudonymisation_round_trip(name: str, email: str, plate: str) -> None:
    text = f"Mon voisin {name} ({email}) gare sa voiture {plate} devant chez moi. {name} rit."
    pseudo = Pseudonymizer()
    hidden = pseudo.pseudonymize(text)
    for raw in (name, email, plate):
        assert raw not in hidden
    assert pseudo.reidentify(hidden) == text


def test_reidentified_answers_keep_phones_masked() -> None:
    pseudo = Pseudonymizer()
    hidden = pseudo.pseudonymize("Mme Roux, 06 12 34 56 78")
    assert pseudo.reidentify(hidden) == "Mme Roux, [numéro masqué]"


# --- the leak scan, independent of pseudonymisation ------------------------------------------

FAST = Budgets(connect_s=1, first_token_s=1, idle_s=0.5, total_s=3, retries=0)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


def _assistant(fake: FakeOllama, harness: Harness, data_class: str = "local") -> Assistant:
    config = ProviderConfig(base_url=fake.url, model=DEFAULT_MODEL, data_class=data_class)
    return Assistant(
        provider=OllamaProvider(config, FAST),
        budgets=FAST,
        book=lambda: BOOK,
        prompt_contacts=lambda category, topics: [
            PromptContact("pompiers", "Sapeurs-pompiers", "Feu")
        ],
        harness=harness,
    )


async def _run(assistant: Assistant, text: str) -> TurnResult:
    result = None
    async for event in chat_turn(assistant, TurnRequest(text)):
        if not isinstance(event, Delta):
            result = event
    assert result is not None
    return result


@pytest.mark.anyio
async def test_leak_scan_blocks_when_email_pseudonymisation_is_off(fake: FakeOllama) -> None:
    """Independence: with e-mails left in clear by pseudonymisation, the scan still blocks."""
    harness = Harness(policy=ALLOW, pseudonymize=PseudonymizeConfig(emails=False))
    before = len(fake.requests)
    result = await _run(_assistant(fake, harness, "external"), "écrivez à paul.durand@mail.fr svp")
    assert (result.source, result.status) == ("fallback", "blocked_policy")
    assert len(fake.requests) == before  # nothing left the process


@pytest.mark.anyio
async def test_external_allowed_sends_only_pseudonymised_text(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal("Parlez-en calmement avec PERS-1, puis notez tout."))
    harness = Harness(policy=ALLOW)
    result = await _run(_assistant(fake, harness, "external"), "Mon voisin Karim fait la fête.")
    sent = json.dumps(fake.requests[-1]["messages"], ensure_ascii=False)
    assert "Karim" not in sent
    assert "PERS-1" in sent
    assert result.status == "ok"
    assert result.text == "Parlez-en calmement avec Karim, puis notez tout."  # shown as written


def test_scan_reports_kinds_never_values() -> None:
    report = scan(["mail paul@x.fr"], ["mail paul@x.fr"])
    assert not report.clean
    assert "paul@x.fr" not in json.dumps(report.audit())


# --- output validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param("", "vide", id="empty"),
        pytest.param("x" * 3000, "trop longue", id="too long"),
        pytest.param("Voyez [[conciliateur]].", "Identifiants inconnus", id="unknown tag"),
        pytest.param("Cliquez <a href='x'>ici</a>", "balise HTML", id="HTML"),
        pytest.param("Voir https://example.org", "lien web", id="link"),
        pytest.param("```\ncode\n```", "bloc de code", id="code block"),
        pytest.param("<message>bonjour</message>", "cadre", id="frame echoed"),
        pytest.param(
            "You should talk to your neighbour and call the police if it is late.",
            "français",
            id="English",
        ),
    ],
)
def test_validation_failures(answer: str, error: str) -> None:
    errors = validate(answer, lambda contact: BOOK.get(contact) is not None)
    assert any(error in e for e in errors), errors


def test_a_good_answer_is_valid() -> None:
    answer = "Notez chaque épisode dans le journal, puis parlez-en avec le syndic [[pompiers]]."
    assert validate(answer, lambda contact: BOOK.get(contact) is not None) == []


# --- the validated cache ---------------------------------------------------------------------


class _MemoryStore:
    def __init__(self) -> None:
        self.entries: dict[str, CacheEntry] = {}

    def get(self, key: str) -> CacheEntry | None:
        return self.entries.get(key)

    def put(self, entry: CacheEntry) -> None:
        self.entries[entry.key] = entry

    def delete(self, key: str) -> None:
        self.entries.pop(key, None)


class _Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_cache_hit_then_tampered_then_stale(fake: FakeOllama) -> None:
    store, clock = _MemoryStore(), _Clock()
    harness = Harness(cache=AnswerCache(store, b"k" * 32, ttl_s=60, clock=clock))
    assistant = _assistant(fake, harness)
    fake.enqueue(Behaviour.normal("Notez les dates dans le journal."))
    first = await _run(assistant, "une question de voisinage")
    assert first.source == "llm"
    before = len(fake.requests)
    second = await _run(assistant, "une question de voisinage")
    assert (second.source, second.text) == ("cache", first.text)
    assert len(fake.requests) == before  # no generation

    key = next(iter(store.entries))
    store.entries[key] = replace(store.entries[key], answer="Appelez le 3975.")  # tampered
    fake.enqueue(Behaviour.normal("Une réponse régénérée."))
    third = await _run(assistant, "une question de voisinage")
    assert (third.source, third.text) == ("llm", "Une réponse régénérée.")

    clock.now += 120  # stale
    fake.enqueue(Behaviour.normal("Encore régénérée."))
    fourth = await _run(assistant, "une question de voisinage")
    assert (fourth.source, fourth.text) == ("llm", "Encore régénérée.")


@pytest.mark.anyio
async def test_cached_answer_that_no_longer_validates_is_regenerated(fake: FakeOllama) -> None:
    store = _MemoryStore()
    harness = Harness(cache=AnswerCache(store, b"k" * 32, ttl_s=60))
    assistant = _assistant(fake, harness)
    fake.enqueue(Behaviour.normal("Appelez les pompiers [[pompiers]]."))
    await _run(assistant, "autre question")
    assistant.book = lambda: _Without(BOOK, "pompiers")  # the directory changed since
    fake.enqueue(Behaviour.normal("Notez tout dans le journal."))
    again = await _run(assistant, "autre question")
    assert again.source == "llm"


class _Without:
    """A contact book missing one contact (a directory after a removal)."""

    def __init__(self, book: Directory, removed: str) -> None:
        self.book, self.removed = book, removed

    def get(self, contact_id: str) -> Contact | None:
        return None if contact_id == self.removed else self.book.get(contact_id)

    @property
    def contacts(self) -> tuple[Contact, ...]:
        return tuple(c for c in self.book.contacts if c.id != self.removed)


# --- the audit log ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_audit_log_holds_no_raw_identifier_nor_secret(
    fake: FakeOllama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-4f9a2b7c1d"  # noqa: S105 - a fake key, to prove it is never logged
    monkeypatch.setenv("NUISANCES_TEST_API_KEY", secret)
    audit = AuditLog(tmp_path / "audit.jsonl")
    config = ProviderConfig(
        base_url=fake.url, model=DEFAULT_MODEL, api_key_env="NUISANCES_TEST_API_KEY"
    )
    assistant = _assistant(fake, Harness(audit=audit))
    assistant.provider = OllamaProvider(config, FAST)
    raw_values = [
        "Karim Benali",
        "karim.benali@mail.fr",
        "06 12 34 56 78",
        "12 rue des Lilas",
        "AB-123-CD",
    ]
    fake.enqueue(
        Behaviour.normal("Parlez à Karim Benali, il habite 12 rue des Lilas (06 12 34 56 78).")
    )
    await _run(
        assistant,
        "Mon voisin Karim Benali (karim.benali@mail.fr, 06 12 34 56 78) du 12 rue des Lilas "
        "gare sa voiture AB-123-CD sur le trottoir.",
    )
    audit.close()
    content = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert fake.requests[-1]["messages"]  # the call happened
    for raw in [*raw_values, "Benali", secret]:
        assert raw not in content, raw
    entry = json.loads(content.splitlines()[-1])
    assert {"request_id", "payload", "answer", "validation", "decision", "status"} <= entry.keys()
    assert "PERS-1" in json.dumps(entry["payload"], ensure_ascii=False)
    assert entry["decision"]["reasons"]
