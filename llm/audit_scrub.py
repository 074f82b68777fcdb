"""The audit log's own scan: a second look at text already pseudonymised, before it is written.

Independent of the pseudonymiser on purpose, and wider than it: what pseudonymisation leaves
(a name without a civility, "chez les Nguyen", a street without a number, "bâtiment B
appartement 34", an e-mail spelled out, a pasted token) must still never reach the audit
file. It errs on the side of removing: a capitalised word inside a sentence is taken for a
name, whatever it is. What it finds is replaced by ``[masqué:<kind>]``; the values are never
kept, only the kinds and counts.
"""

from __future__ import annotations

import re
from collections import Counter

from llm.leakscan import find_identifiers

__all__ = ["scrub"]

_UPPER = "A-ZÀ-ÖØ-Þ"
_LOWER = "a-zß-öø-ÿ"
# Tokens: bearer tokens of this service, and any long run mixing letters and digits.
_TOKEN = re.compile(r"\bnui_[\w-]+|\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{20,}")
_SPELLED_EMAIL = re.compile(
    r"[\w.+-]+\s*(?:\(|\[)?\s*(?i:arobase|at|chez)\s*(?:\)|\])?\s*[\w-]+"
    r"(?:\s*(?:\(|\[)?\s*(?i:point|dot)\s*(?:\)|\])?\s*[\w-]+)+"
)
_PLACE = (
    r"(?i:rue|avenue|av\.|boulevard|bd|place|allée|allee|impasse|chemin|route|quai|cours|square|"
    r"passage|résidence|residence|cité|cite|villa|sentier|lotissement|hameau|lieu-dit|parc)"
)
# A street, with or without its number: the way word, its particles, then its name's words.
_STREET = re.compile(
    rf"(?:\b\d{{1,4}}(?:\s?(?i:bis|ter))?,?\s+)?\b{_PLACE}"
    r"\s+(?:(?i:de la|de l'|de l’|du|des|de|d'|d’|la|le|les)\s*)?"
    rf"[{_UPPER}\d][\w'’-]*(?:\s+(?:(?i:de|du|des|la|le|d'|d’)\s+)?[{_UPPER}][\w'’-]*){{0,4}}"
)
# Where someone lives inside a building: "bâtiment B", "appartement 34", "3e étage porte 12".
_DWELLING = re.compile(
    r"\b(?i:bâtiment|batiment|bât\.?|bat\.?|appartement|appart\.?|appt\.?|apt\.?|porte|"
    r"logement|lot|entrée|entree|escalier|cage|étage|etage|boîte aux lettres|chambre)"
    rf"\s+(?:n[°o]\s*)?(?:\d[\w-]{{0,5}}|[{_UPPER}]{{1,2}}\d{{0,3}})(?![\w'’-])"
)
# A postcode, and the town after it.
_POSTCODE = re.compile(rf"\b\d{{5}}\b(?:\s+[{_UPPER}][\w'’-]+(?:[ -][{_UPPER}][\w'’-]+)*)?")
_ORDINAL_FLOOR = re.compile(r"\b\d{1,2}\s*(?:e|è|ème|eme|er|ère)\s+(?i:étage|etage)\b")
# Capitalised words are taken for names, except a sentence's first word when it is a common
# word ("Depuis hier…") and no capitalised word follows it.
_CAPITALISED = re.compile(rf"(?<![\w'’-])[{_UPPER}][{_LOWER}{_UPPER}'’-]+(?![\w'’-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?…:;\n]\s*|[«“\"(]\s*)$")
# All-caps words of two to five letters are acronyms (SAMU, EDF, HLM) unless several follow.
_ACRONYM = re.compile(rf"^[{_UPPER}]{{2,5}}$")
# Words that open French sentences; a capitalised opener not listed here is masked.
_COMMON = frozenset(
    """
    a ah ai aide aidez aidez-moi alors appeler appelez après attention au aucun aucune
    aujourd'hui aujourd’hui auprès aussi autre autrement avant avec avez avons bah ben bien
    bon bonjour bonne bonsoir bref c'est ca car ce ceci cela celle celui ces cet cette
    chaque chez ci comme comment concernant contactez contre coucou c’est d'abord d'ailleurs
    dans de deja demain depuis derrière des desormais dis dites doit donc dont du durant dès
    déjà désormais d’abord d’ailleurs elle elles en encore enfin ensuite entre es essayez
    est est-ce et etait eu eux excusez faites faut fermez gardez help hey hier hors hum
    hélas ici il ils j'ai j'en j'entends j'habite jamais je jusqu'à jusqu’à j’ai j’en
    j’entends j’habite l'autre la laissez le les leur leurs lui là l’autre ma madame mais
    malgré me merci mes met mieux moi moins mon monsieur n'importe ne ni nos notre nous nul
    n’importe oh ok okay on ou oui ouvrez où par parce pardon parfois pas pendant peut
    peut-être peux plus plusieurs pour pourquoi pourriez pourtant pouvez presque près
    prévenez puis puisque qu'est-ce quand que quel quelle quelles quelqu'un quelque quelques
    quelqu’un quels qui quittez quoi qu’est-ce restez rien s'il sa salut sans savez se selon
    ses si sinon soit son sont sortez souvent stp suis sur surtout svp s’il ta te tes toi
    ton tous tout toute toutes très tu un une urgent vers vite voici voila voilà vos votre
    vous vraiment y à ça écrivez était étant êtes
    """.split()  # noqa: SIM905 - a word list reads better as prose
)


def _replace(text: str, pattern: re.Pattern[str], kind: str, found: Counter[str]) -> str:
    def swap(match: re.Match[str]) -> str:
        found[kind] += 1
        return f"[masqué:{kind}]"

    return pattern.sub(swap, text)


def _names(text: str, found: Counter[str]) -> str:
    pieces: list[str] = []
    last = 0
    for match in _CAPITALISED.finditer(text):
        word = match.group(0)
        at_start = _SENTENCE_START.search(text[: match.start()]) is not None
        following = text[match.end() : match.end() + 40].lstrip()
        next_capitalised = bool(following) and following[0].isupper()
        if _ACRONYM.match(word) and not next_capitalised:
            continue
        opener = word.lower().split("-")[0]
        if at_start and not next_capitalised and (word.lower() in _COMMON or opener in _COMMON):
            continue  # "Depuis", "Bonjour", "Le": a sentence's first word
        pieces.append(text[last : match.start()])
        pieces.append("[masqué:nom]")
        found["nom"] += 1
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def scrub(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with every identifier the scan sees replaced; and the kinds with counts."""
    found: Counter[str] = Counter()
    text = _replace(text, _TOKEN, "jeton", found)
    text = _replace(text, _STREET, "adresse", found)
    for kind, value in sorted(find_identifiers(text), key=lambda kv: -len(kv[1])):
        if value and value in text:
            found[kind] += text.count(value)
            text = text.replace(value, f"[masqué:{kind}]")
    text = _replace(text, _SPELLED_EMAIL, "courriel", found)
    text = _replace(text, _DWELLING, "adresse", found)
    text = _replace(text, _POSTCODE, "adresse", found)
    text = _replace(text, _ORDINAL_FLOOR, "adresse", found)
    text = _names(text, found)
    return text, dict(found)
