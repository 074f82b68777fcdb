"""Added latency of the guarded harness per turn: pseudonymise + leak scan + validate.

A 2,000-character message full of identifiers, with six turns of history, toward an external
provider (so everything runs: policy, pseudonymisation of the payload, the leak scan over the
serialised request), then validation of a 1,200-character answer and its re-identification.
Prints figures; asserts nothing. Run: .venv/bin/python scripts/bench_harness.py
"""

from __future__ import annotations

import statistics
import time

from directory.snapshot import Directory
from llm.config import ProviderConfig
from llm.leakscan import scan
from llm.policy import PolicyConfig, decide
from llm.prompting import PromptContact, build_payload
from llm.pseudonymize import Pseudonymizer
from llm.types import Message
from llm.validate import validate

BOOK = Directory.national_only()
CONTACTS = [PromptContact(c.id, c.name, c.description) for c in BOOK.contacts]
SENTENCE = (
    "Mon voisin Karim Benali (karim.benali@mail.fr, 06 12 34 56 78) du 12 rue des Lilas, "
    "75011 Paris, gare sa voiture AB-123-CD devant ma porte et Mme Dupont se plaint aussi. "
)
MESSAGE = (SENTENCE * 20)[:2000]
HISTORY = [
    m
    for i in range(6)
    for m in (Message("user", SENTENCE * 3), Message("assistant", f"Réponse {i} : notez tout."))
]
ANSWER = (
    "Notez chaque épisode dans le journal, parlez-en avec PERS-1 puis écrivez au syndic. " * 15
)[:1200]
PROVIDER = ProviderConfig(base_url="https://api.example.com", model="m", data_class="external")
POLICY = PolicyConfig(allow_external=True)


PROSE = (
    "Bonjour, depuis trois mois le voisin du dessus fait du bruit presque tous les soirs : "
    "musique forte, talons sur le parquet, chaises que l'on traîne, parfois jusqu'à deux heures "
    "du matin. J'ai essayé de lui parler deux fois, il est poli mais rien ne change. "
)
REALISTIC = (
    "Mon voisin M. Leroy, au 12 rue des Lilas, ne répond pas à mes courriers. " + PROSE * 10
)[:2000]
REALISTIC_HISTORY = [
    m for i in range(6) for m in (Message("user", PROSE), Message("assistant", f"Réponse {i}."))
]


def one_turn(message: str = MESSAGE, history: list[Message] = HISTORY) -> None:
    payload = build_payload(message, contacts=CONTACTS, history=history)
    pseudo = Pseudonymizer()
    sent = payload.with_contents(
        [
            pseudo.pseudonymize(e.content) if e.data_class == "user_text" else e.content
            for e in payload.elements
        ]
    )
    decide(PROVIDER, payload.elements, POLICY)
    raw = [e.content for e in payload.elements if e.data_class == "user_text"]
    report = scan([e.content for e in sent.elements], raw, pseudo.originals)
    assert report.clean, report.kinds
    validate(ANSWER, lambda i: BOOK.get(i) is not None)
    pseudo.reidentify(ANSWER)


def measure(label: str, message: str, history: list[Message]) -> None:
    for index in range(20):
        one_turn(f"{message[:-12]} essai {index:05d}", history)
    timings = []
    for index in range(300):
        # A new message every turn (nothing memoised for it); the history comes back, as it
        # does turn after turn in a conversation.
        fresh = f"{message[:-12]} essai {index + 100:05d}"
        start = time.perf_counter()
        one_turn(fresh, history)
        timings.append((time.perf_counter() - start) * 1000)
    timings.sort()
    print(f"{label}:")
    p90, p99 = timings[int(0.9 * len(timings))], timings[int(0.99 * len(timings))]
    print(
        f"  median {statistics.median(timings):.2f} ms, p90 {p90:.2f} ms, "
        f"p99 {p99:.2f} ms, max {timings[-1]:.2f} ms"
    )


def main() -> None:
    print("harness per turn: pseudonymise + policy + leak scan + validate, external provider")
    measure(
        "realistic: 2,000-char complaint with a name and an address, 6 turns of history",
        REALISTIC,
        REALISTIC_HISTORY,
    )
    measure(
        "dense: 2,000 chars with 20 phones, e-mails, addresses, plates; 6 dense turns of history",
        MESSAGE,
        HISTORY,
    )


if __name__ == "__main__":
    main()
