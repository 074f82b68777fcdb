"""Context cues that decide whether a run of digits is a phone number to mask or text to keep.

The patterns look at a bounded window around a candidate: at most ``LEFT_CONTEXT`` characters
of the already masked text before it and ``RIGHT_CONTEXT`` characters of the text after it.
Keeping the window bounded is what lets the streaming masker decide exactly as the whole-text
masker does.

- ``TEL_LINK``: the digits are the target of a ``tel:`` (or ``sms:``, ``callto:``) link.
- ``REFERENCE_LABEL``: the digits are presented as a reference (SIREN, n°, dossier, PV...).
- ``is_call_cue``: a short service number (3xxx, 10xx, 118xxx, 116xxx) is presented as something
  to call ("appelez le 3237", "le 3975 permet", "composez le 118 712", "(3939)",
  "SOS Médecins : 3624", but not "Nombre de plaintes : 3200").
- ``VERBAL_CALL_CUE``, ``ANNOUNCED``: a verb of calling or "numéro est le" before a number
  (what a five-digit number, or a foreign one without 0 or +, needs to be masked).
- ``TOWN_AFTER``: a capitalised word after five digits makes them a postal code.
- ``UNIT_AFTER``: the digits are a quantity (euros, dB, %, minutes, signalements...).
- ``DATE``: dates in the normalised digits (06/12/2024, 2024-07-14, 14.07.2024, 14/07).
"""

from __future__ import annotations

import regex

#: Characters of original text before a candidate that cues may look at.
LEFT_CONTEXT = 48
#: Characters of original text after a cluster that cues may look at.
RIGHT_CONTEXT = 24

_FLAGS = regex.IGNORECASE | regex.VERSION0

TEL_LINK = regex.compile(
    r"(?:(?<![^\W_])(?:tel|callto|sms|facetime(?:-audio)?)\s*:\s*(?://)?|wa\.me/)\s*\(?$",
    _FLAGS,
)

# Words that present what follows as a reference on their own.
_STRONG_LABELS = (
    r"n[°º˚]|no\.|nᵒ|num\.|réf(?:érence)?s?\.?|ref\.?|siren|siret|rcs|tva|naf|ape|pv|pc|dp"
    r"|lots?|articles?|art\.|alinéa|loi|arrêté|décret|ordonnance|circulaire|délibération"
    r"|dossier|facture|contrat|commande|plainte|série|parcelle|cadastre|matricule"
    r"|immatriculation|sinistre|bordereau|quittance|iban|bic|rg|affaire|jugement|arrêt"
    r"|requête|ticket|colis|badge|avis|procès-verbal"
)
# Words that need "numéro", "n°" or "référence" before them to be a reference label.
_WEAK_LABELS = (
    r"client|adhérent|abonné|compte|suivi|identifiant|allocataire|sécurité sociale|fiscal"
    r"|fiscale|invariant|cadastral|d'ordre|de série|de lot"
)
REFERENCE_LABEL = regex.compile(
    rf"(?<![^\W_])(?:{_STRONG_LABELS}|(?:numéro|n[°º]|réf(?:érence)?\.?)\s+(?:d['’]\s*|de\s+)?"
    rf"(?:{_WEAK_LABELS}))(?:\s*(?:n[°º]|no\.?|numéro|[:#]))*\s*$",
    _FLAGS,
)

_CALL_VERBS = (
    r"appel\w*|compos\w*|tap\w*|fai(?:tes|re|s)|joind\w*|joign\w*|contact\w*|rappel\w*"
    r"|téléphon\w*|sonne[rz]|numérot\w*"
)
_NUMBER_NOUN = r"num[ée]ro(?:\s+(?:court|vert|gratuit|unique|national|spécial|azur|d['’]\w+))?"
CALL_CUE = regex.compile(
    rf"(?:(?<![^\W_])(?:{_CALL_VERBS})\s+(?:(?:le|au|ce)\s+)?(?:{_NUMBER_NOUN}\s+)?"
    rf"|(?<![^\W_])(?:le|au|du|l['’]|ce)\s*(?:{_NUMBER_NOUN}\s+)?"
    rf"|(?<![^\W_])(?:t[ée]l[ée]?(?:phone)?\.?|{_NUMBER_NOUN}|contact|appel|ligne|standard)"
    r"\s*:?\s*"
    r"|\(\s*)$",
    _FLAGS,
)

# A cue with a verb or a noun of calling right before the number ("appelez le", "SMS au",
# "numéro :"), not an article alone: what a five-digit number needs to be masked, since a
# postal code is also five digits ("au 10000 Paris", "(69003)").
VERBAL_CALL_CUE = regex.compile(
    rf"(?<![^\W_])(?:{_CALL_VERBS}|sms|texto|message|{_NUMBER_NOUN}|t[ée]l[ée]?(?:phone)?\.?)"
    rf"\s*(?:est\s+)?(?:(?:le|au|ce)\s+)?(?:{_NUMBER_NOUN}\s+)?:?\s*$",
    _FLAGS,
)
# A number presented as a phone number by what comes before it: a verb of calling, "numéro
# est le", "tél. :", "GSM :" (not "le numéro 2024/004817", which is a file's).
ANNOUNCED = regex.compile(
    rf"(?<![^\W_])(?:(?:{_CALL_VERBS})\s+(?:(?:le|au|ce)\s+)?(?:{_NUMBER_NOUN}\s+)?:?"
    r"|num[ée]ro\s+(?:est\s+(?:le\s+)?|:)"
    r"|(?:t[ée]l[ée]?(?:phone)?\.?|gsm|portable|mobile)\s*(?:est\s+(?:le\s+)?|:|au))\s*$",
    _FLAGS,
)
#: A capitalised word after a five-digit number makes it a postal code with its town.
TOWN_AFTER = regex.compile(r"^[\s\u00a0\u202f]*\p{Lu}")

# "SOS Médecins : 3624", "- Pharmacie de garde : 3237" present a number to call; "Nombre de
# plaintes : 3200" and "Code postal : 3000" do not.
_COLON_LABEL = regex.compile(r"(?P<label>[^\n:;,.()]{1,40}?)\s*:\s*$", _FLAGS)
_QUANTITY = regex.compile(
    r"(?<![^\W_])(?:nombre|nb|total|montant|somme|prix|coût|tarif|surface|superficie|population"
    r"|score|code|niveau|moyenne|durée|distance|hauteur|budget|quantité|volume|poids|capacité"
    r"|effectif|loyer|charges|salaire|revenu|compteur|index|relevé|mesure|valeur|taux|année"
    r"|plafond|seuil|amende|indemnité|frais|dépôt|caution)(?![^\W_])",
    _FLAGS,
)


def is_call_cue(left: str) -> bool:
    """True when ``left`` presents the short number that follows as something to call."""
    if CALL_CUE.search(left) is not None:
        return True
    label = _COLON_LABEL.search(left)
    return label is not None and _QUANTITY.search(label.group("label")) is None


UNIT_AFTER = regex.compile(
    r"^[\s\u00a0\u202f]*(?:[€$£%‰°]|(?:euros?|eur|dollars?|francs?|db|dba|décibels?|hz|khz"
    r"|km|cm|mm|m|m²|m2|m³|kg|g|t|l|ml|cl|h|min|mn|s|ms|ans?|années?|jours?|mois|semaines?"
    r"|heures?|minutes?|secondes?|nuits?|fois|habitants?|personnes?|logements?|signalements?"
    r"|plaintes?|mètres?|kilomètres?|litres?|kilos?|tonnes?|pages?|pièces?"
    r"|voitures?|véhicules?|foyers?|ménages?|exemplaires?|points?|voix|votes?"
    r"|rue|avenue|av\.|boulevard|bd|chemin|allée|place|impasse|quai|route|cours|bis|ter"
    r"|(?:de\s+la|du|de\s+l['’]|des)\s+(?:rue|avenue|boulevard|route|place|allée|impasse|quai)"
    r"|janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre)"
    r"(?![^\W_]|['’]))",
    _FLAGS,
)

# Dates in normalised text (ASCII digits): d/m/y, y-m-d, d.m.y, d-m-y, and d/m.
DATE = regex.compile(
    r"(?<![\d/.,\-])(?:"
    r"(?P<d1>[0-3]?\d)(?P<s>[/.\-])(?P<m1>[01]?\d)(?P=s)(?:19|20)?\d\d"
    r"|(?:19|20)\d\d(?P<s2>[/.\-])(?P<m2>[01]?\d)(?P=s2)(?P<d2>[0-3]?\d)"
    r"|(?P<d3>[0-3]?\d)/(?P<m3>[01]?\d)"
    r")(?![/.\-]?\d)"
)


def is_plausible_date(match: regex.Match[str]) -> bool:
    """True when the day and month of a ``DATE`` match are in range."""
    for day_group, month_group in (("d1", "m1"), ("d2", "m2"), ("d3", "m3")):
        day, month = match.group(day_group), match.group(month_group)
        if day is not None and month is not None:
            return 1 <= int(day) <= 31 and 1 <= int(month) <= 12
    return False
