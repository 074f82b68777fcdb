"""Masking of phone numbers: tables of phrases with harmless look-alikes, and properties.

Tables say what is masked and what is kept, each row with its reason. Hypothesis checks that
generated French numbers are masked in every separator and digit script, that generated dates,
times, amounts and references are kept, that masking is idempotent, that spans point into the
original text, and that ``StreamMasker`` gives the same text for every way of cutting it.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safety.masking import MASK, MAX_HOLDBACK, NATIONAL_NUMBERS, StreamMasker, mask_numbers
from safety.spelled_numbers import MAX_WORD_LENGTH, WORD_PATTERN, word_value

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "masking" / "pub.jsonl"
CORPUS_TEXTS = [
    json.loads(line)["text"]
    for line in CORPUS.read_text(encoding="utf-8").splitlines()
    if line.strip()
]

# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

MASKED = [
    pytest.param("Appelez-moi au 06 12 34 56 78.", "06 12 34 56 78", id="mobile in pairs"),
    pytest.param("Tél : 01.23.45.67.89", "01.23.45.67.89", id="landline with dots"),
    pytest.param("fixe 0123456789 le soir", "0123456789", id="compact ten digits"),
    pytest.param("au 07-81-92-03-14 ou par écrit", "07-81-92-03-14", id="hyphens"),
    pytest.param("au 06/12/34/56/78", "06/12/34/56/78", id="slashes, not a date"),
    pytest.param("au 06 – 12 – 34 – 56 – 78", "06 – 12 – 34 – 56 – 78", id="spaced en dashes"),
    pytest.param("au 06\u202f12\u202f34\u202f56\u202f78", "06\u202f12", id="narrow no-break"),
    pytest.param("au 06\u200912\u200934\u200956\u200978", "06\u200912", id="thin spaces"),
    pytest.param("au 06\u200d12\u200d34\u200d56\u200d78", "06\u200d12", id="zero-width joiner"),
    pytest.param("au 06\ufeff12\ufeff34\ufeff56\ufeff78", "06\ufeff12", id="byte order marks"),
    pytest.param("au 06·12·34·56·78", "06·12·34·56·78", id="middle dots"),
    pytest.param("au 06_12_34_56_78", "06_12_34_56_78", id="underscores"),
    pytest.param("au 06•12•34•56•78", "06•12•34•56•78", id="bullets"),
    pytest.param("au 06\t12\t34\t56\t78", "06\t12", id="tabs"),
    pytest.param("au 06 12 34\r\n56 78 merci", "06 12 34", id="CRLF inside the number"),
    pytest.param("au ０６ １２ ３４ ５６ ７８", "０６ １２", id="full-width digits"),
    pytest.param("au ۰۶۱۲۳۴۵۶۷۸", "۰۶۱۲۳۴۵۶۷۸", id="extended Arabic-Indic digits"),
    pytest.param("au ०६ १२ ३४ ५६ ७८", "०६ १२", id="Devanagari digits"),
    pytest.param("au 𝟘𝟞 𝟙𝟚 𝟛𝟜 𝟝𝟞 𝟟𝟠", "𝟘𝟞 𝟙𝟚", id="double-struck digits"),
    pytest.param("au O6 l2 34 56 78", "O6 l2 34 56 78", id="letters O and l for digits"),
    pytest.param("au o1 42 6o 33 21", "o1 42 6o 33 21", id="lower-case o for zero"),
    pytest.param("au 0 1 4 2 6 0 3 3 2 1.", "0 1 4 2 6 0 3 3 2 1", id="one digit at a time"),
    pytest.param("au 06 12 34 56 78 90 12 puis", "06 12 34 56 78", id="followed by digits"),
    pytest.param("Joignable au +33 1 42 60 33 21.", "+33 1 42 60 33 21", id="+33 spaced"),
    pytest.param("le 0033 1 42 60 33 21", "0033 1 42 60 33 21", id="0033 prefix"),
    pytest.param("le +33(0)1 42 60 33 21", "+33(0)1 42 60 33 21", id="+33(0) glued"),
    pytest.param("au +32 470 12 34 56", "+32 470 12 34 56", id="Belgian mobile"),
    pytest.param("au 0032 2 512 34 56", "0032 2 512 34 56", id="Belgian 0032"),
    pytest.param("au +41 79 321 54 76", "+41 79 321 54 76", id="Swiss mobile"),
    pytest.param("au +352 27 12 34 56", "+352 27 12 34 56", id="Luxembourg"),
    pytest.param("au +49 30 1234 5678", "+49 30 1234 5678", id="German landline"),
    pytest.param("au +1 212-555-0147", "+1 212-555-0147", id="North American"),
    pytest.param("au 04 72 12 34 56 ou 04 72 98 76 54", "04 72 98 76 54", id="second of two"),
    pytest.param("06 12 34 56 78 07 98 76 54 32", "07 98 76 54 32", id="two glued numbers"),
    pytest.param("Liste :\n06 12 34 56 78\n07 98 76 54 32", "07 98 76 54 32", id="line list"),
    pytest.param("Bureau 12 06 12 34 56 78", "06 12 34 56 78", id="after a stray number"),
    pytest.param("au 02 512 34 56 en semaine", "02 512 34 56", id="Belgian national"),
    pytest.param("au 021 312 34 56 en semaine", "021 312 34 56", id="Swiss national"),
    pytest.param("au 6 12 34 56 78 (sans le zéro)", "6 12 34 56 78", id="missing leading zero"),
    pytest.param("[Syndic](tel:0612345678)", "0612345678", id="markdown tel link"),
    pytest.param("[Aide](tel:3237)", "3237", id="tel link to a short number"),
    pytest.param('<a href="tel:+33612345678">Appeler</a>', "+33612345678", id="HTML tel link"),
    pytest.param("[Écrire](sms:+33612345678)", "+33612345678", id="sms link"),
    pytest.param("Tél0612345678", "0612345678", id="glued to a label"),
    pytest.param("appelez le 3646 demain", "3646", id="service number to call"),
    pytest.param("composez le 3975.", "3975", id="service number to dial"),
    pytest.param("contactez le 1014 depuis une ligne fixe", "1014", id="10xx operator number"),
    pytest.param("Le numéro court 3237 répond la nuit.", "3237", id="presented as a number"),
    pytest.param("Allô Service Public (3939)", "3939", id="service number in brackets"),
    pytest.param("joignez le 118 218 pour un annuaire", "118 218", id="118 directory number"),
    pytest.param("le 118218 est payant", "118218", id="compact 118 directory number"),
    pytest.param("appelez le 116 000 si un enfant disparaît", "116 000", id="116 not allowed"),
    pytest.param(
        "au zéro six, douze, trente-quatre, cinquante-six, soixante-dix-huit",
        "zéro six",
        id="spelled pairs",
    ),
    pytest.param(
        "au zéro un quarante-deux zéro zéro dix-huit vingt-trois",
        "quarante-deux",
        id="spelled without commas",
    ),
    pytest.param(
        "au zéro quatre, septante-deux, nonante, octante, onze",
        "septante-deux",
        id="Belgian and Swiss tens",
    ),
    pytest.param("au zéro six 12 34 56 78", "zéro six 12", id="first pair spelled"),
    pytest.param("au 06 douze 34 cinquante-six 78", "06 douze", id="alternating words"),
    pytest.param("au 09 69 32 15 15 en journée", "15 15", id="allowed 15 inside a number"),
    pytest.param("au 01 12 11 17 18 aussi", "01 12 11 17 18", id="allowed 17, 18 inside"),
    pytest.param("n° client 06 12 34 56 78", "06 12 34 56 78", id="phone-shaped after a label"),
    pytest.param("SIREN 443 061 841 0612345678", "0612345678", id="compact after a reference"),
    pytest.param("| Syndic | 01 40 50 60 70 |", "01 40 50 60 70", id="table cell"),
    pytest.param("`06 12 34 56 78`", "06 12 34 56 78", id="inline code"),
    pytest.param("au ＋３３　６　１２　３４　５６　７８", "３４", id="full-width plus and spaces"),
    pytest.param("au ０６．１２．３４．５６．７８", "０６．１２", id="full-width full stops"),
    pytest.param("au 06\u200e12\u200e34\u200e56\u200e78", "06\u200e12", id="bidi marks"),
    pytest.param("Liège : 0475/12.34.56", "0475/12.34.56", id="Belgian slash and dots"),
    pytest.param("Monaco : +377 93 15 06 00", "+377 93 15 06 00", id="Monaco"),
    pytest.param("wa.me/33612345678", "33612345678", id="WhatsApp link"),
    pytest.param("https://exemple.fr/?tel=0612345678", "0612345678", id="number in a URL"),
    pytest.param("Composez le 39 39 (Allô Service Public).", "39 39", id="service number in pairs"),
    pytest.param("SOS Médecins : 3624", "3624", id="service number in a contact list"),
    pytest.param("Appelez le 3237 s'il y a urgence.", "3237", id="elision is no unit"),
]

KEPT = [
    pytest.param(
        "Appelez le 15, le 17, le 18 ou le 112.",
        "le 15, le 17, le 18 ou le 112",
        id="emergency numbers",
    ),
    pytest.param("Le 3114 et le 3919 sont gratuits.", "3114", id="allowed 4-digit numbers"),
    pytest.param("le 116 006 ou le 116006", "116 006 ou le 116006", id="116 006 both ways"),
    pytest.param("composez le 191, le 196 ou le 197", "191, le 196 ou le 197", id="rare numbers"),
    pytest.param("Le 15 juillet 2024 à 23h45", "Le 15 juillet 2024 à 23h45", id="date and time"),
    pytest.param(
        "le 06/12/2024 puis le 07/01/2025", "06/12/2024 puis le 07/01/2025", id="two dates"
    ),
    pytest.param("le 06.12.2024", "06.12.2024", id="dotted date"),
    pytest.param("le 06-12-2024", "06-12-2024", id="hyphenated date"),
    pytest.param("du 01/02 au 03/04", "du 01/02 au 03/04", id="short dates"),
    pytest.param("2024-11-02T23:17:45+01:00", "2024-11-02T23:17:45+01:00", id="ISO timestamp"),
    pytest.param("de 08:30 à 12:00", "de 08:30 à 12:00", id="clock times"),
    pytest.param("de 8h30 à 17h, 7j/7, 24h/24", "de 8h30 à 17h, 7j/7, 24h/24", id="opening hours"),
    pytest.param("en 2019, 2020 et 2021", "2019, 2020 et 2021", id="years in a list"),
    pytest.param("1 500 euros et 250,40 €", "1 500 euros et 250,40 €", id="amounts"),
    pytest.param("un plafond de 3 000 €", "3 000 €", id="thousands"),
    pytest.param("le 3000 € promis", "3000 €", id="short-number shape with a currency"),
    pytest.param("0,80 €/min", "0,80 €/min", id="price per minute"),
    pytest.param("62 dB(A) à 1,5 m", "62 dB(A) à 1,5 m", id="decibels and metres"),
    pytest.param("une hausse de 15 %", "15 %", id="percentage"),
    pytest.param("article R1336-5 et L2212-2", "R1336-5 et L2212-2", id="legal articles"),
    pytest.param("l'article 1240 du Code civil", "article 1240", id="civil code article"),
    pytest.param("loi n° 89-462 du 6 juillet 1989", "89-462", id="law number"),
    pytest.param("arrêté n° 2019-0815", "2019-0815", id="decree number"),
    pytest.param("75002 Paris, 13008 Marseille", "75002 Paris, 13008 Marseille", id="postal codes"),
    pytest.param("06000 Nice", "06000 Nice", id="postal code starting with 06"),
    pytest.param("au 12 rue de la Paix, 4e étage", "12 rue de la Paix, 4e étage", id="address"),
    pytest.param("37 nuisances en 6 semaines", "37 nuisances en 6 semaines", id="counts"),
    pytest.param("3 114 signalements", "3 114 signalements", id="count shaped like 3114"),
    pytest.param("3 237 signalements en 2023", "3 237 signalements", id="count, thousands"),
    pytest.param("le 3237 signalements", "3237 signalements", id="count after an article"),
    pytest.param("durée : 3 h 20, puis 1 h 15", "3 h 20, puis 1 h 15", id="durations"),
    pytest.param("tantièmes : 87/10 000", "87/10 000", id="fraction"),
    pytest.param("note : 8,5/10", "8,5/10", id="score"),
    pytest.param("SIREN 443 061 841", "443 061 841", id="SIREN"),
    pytest.param("SIRET 812 345 678 00024", "812 345 678 00024", id="SIRET"),
    pytest.param("facture n° 0612345", "0612345", id="7-digit reference"),
    pytest.param("PV 24/01234", "PV 24/01234", id="police report"),
    pytest.param("référence PC 013 055 24 00123", "013 055 24 00123", id="building permit"),
    pytest.param("Numéro de dossier : 2024-118734", "2024-118734", id="case number"),
    pytest.param("n° client 4512 7890 33", "4512 7890 33", id="customer number"),
    pytest.param("série 5KQ-2291", "5KQ-2291", id="serial number"),
    pytest.param("Lot n° 1204", "Lot n° 1204", id="lot number"),
    pytest.param("le bus 96 passe toutes les 8 minutes", "bus 96", id="bus line"),
    pytest.param("2 × 45 minutes", "2 × 45 minutes", id="multiplication"),
    pytest.param("un, deux, trois voisins", "un, deux, trois voisins", id="spelled counts"),
    pytest.param("vingt et une heures", "vingt et une heures", id="spelled time"),
    pytest.param(
        "six semaines et dix-huit jours", "six semaines et dix-huit jours", id="spelled durations"
    ),
    pytest.param(
        "Le voisin du 3e, OO7 et R2D2", "Le voisin du 3e, OO7 et R2D2", id="letters and digits"
    ),
    pytest.param("IPv4 192.168.1.1", "192.168.1.1", id="IP address"),
    pytest.param("version 1.2.3", "1.2.3", id="version number"),
    pytest.param("Le siège est au 3237 boulevard Saint-Laurent.", "3237", id="street number"),
    pytest.param("Nombre de plaintes : 3200", "3200", id="quantity after a colon"),
    pytest.param("Code postal : 3000 Liège", "3000 Liège", id="Belgian postal code"),
    pytest.param("Numéro fiscal : 01 23 456 789 012", "01 23 456 789 012", id="tax number"),
    pytest.param("RCS Paris B 443 061 841", "443 061 841", id="trade register"),
    pytest.param("article L.2212-2 du CGCT", "L.2212-2", id="article with a dot"),
    pytest.param("IBAN FR76 3000 6000 0112 3456 7890 189", "0112 3456", id="IBAN"),
    pytest.param("GPS : 48.8566, 2.3522", "48.8566, 2.3522", id="coordinates"),
    pytest.param(
        "sécurité sociale 1 85 05 78 006 084 36",
        "1 85 05 78 006 084 36",
        id="social security number",
    ),
]

ALLOWED_CASES = [
    pytest.param(
        "appelez le 3237", NATIONAL_NUMBERS | {"3237"}, "3237", id="a caller may allow more numbers"
    ),
    pytest.param("appelez le 3114", frozenset[str](), None, id="nothing allowed: 3114 masked"),
    pytest.param(
        "appelez le 112", frozenset[str](), None, id="nothing allowed: 112 to call is masked"
    ),
]


@pytest.mark.parametrize(("text", "secret"), MASKED)
def test_masked(text: str, secret: str) -> None:
    masked = mask_numbers(text)
    assert secret not in masked.text
    assert MASK in masked.text
    assert masked.spans


@pytest.mark.parametrize(("text", "kept"), KEPT)
def test_kept(text: str, kept: str) -> None:
    masked = mask_numbers(text)
    assert kept in masked.text
    assert masked.text == text
    assert masked.spans == ()


@pytest.mark.parametrize(("text", "allowed", "kept"), ALLOWED_CASES)
def test_allowed_parameter(text: str, allowed: frozenset[str], kept: str | None) -> None:
    masked = mask_numbers(text, allowed).text
    if kept is None:
        assert MASK in masked
    else:
        assert kept in masked


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("\x00\x01\x02\x7f", id="control characters"),
        pytest.param("\ud800\udfff06 12 34 56 78", id="lone surrogates"),
        pytest.param("0" * 100_000, id="long run of zeros"),
        pytest.param("06 12 34 56 78 " * 2_000, id="many numbers"),
        pytest.param("1 " * 20_000, id="long run of small numbers"),
        pytest.param("+" * 1_000 + "3" * 1_000, id="plus signs"),
        pytest.param("zéro " * 5_000, id="spelled zeros"),
        pytest.param("(" * 500 + "06" + ")" * 500, id="brackets"),
        pytest.param(bytes(range(256)).decode("latin-1") * 20, id="binary-ish"),
    ],
)
def test_never_raises(text: str) -> None:
    masked = mask_numbers(text)
    _check_spans(text, masked.text, masked.spans)
    masker = StreamMasker()
    streamed = "".join(masker.feed(text[i : i + 97]) for i in range(0, len(text), 97))
    assert streamed + masker.close() == masked.text


def test_stream_masks_a_number_split_across_chunks() -> None:
    masker = StreamMasker()
    out = [masker.feed(chunk) for chunk in ["Appelez le 06 1", "2 34 5", "6 78 demain."]]
    out.append(masker.close())
    assert "".join(out) == f"Appelez le {MASK} demain."
    assert "06" not in out[0]


def test_stream_emits_plain_prose_without_delay() -> None:
    text = "Le voisin parle fort la nuit et le bruit gêne tout le monde."
    masker = StreamMasker()
    fed = emitted = ""
    for char in text:
        fed += char
        emitted += masker.feed(char)
        assert fed.startswith(emitted)
        assert " " not in fed[len(emitted) :], "only a partial word may be held back"
    assert emitted + masker.close() == text


def test_stream_after_close_returns_nothing() -> None:
    masker = StreamMasker()
    assert masker.feed("au 06 12 34 56 78") == "au "
    assert masker.close() == MASK
    assert masker.feed("encore") == ""
    assert masker.close() == ""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0 " * 5_000, id="digits one by one"),
        pytest.param("zéro six " * 2_000, id="spelled pairs"),
        pytest.param("06 12 34 56 78\n" * 500, id="list of numbers"),
        pytest.param("quatre-vingt-dix-sept " * 1_000, id="long spelled numbers"),
        pytest.param("12345678901234567 " * 500, id="long digit groups"),
        pytest.param("(+OOO12345678901234567 .- " * 300, id="longest tokens and separators"),
    ],
)
def test_stream_holdback_is_bounded(text: str) -> None:
    masker = StreamMasker()
    for start in range(0, len(text), 7):
        masker.feed(text[start : start + 7])
        assert len(masker._pending) <= MAX_HOLDBACK


# --------------------------------------------------------------------------------------------
# Spelled numbers
# --------------------------------------------------------------------------------------------

_UNITS = [
    "zéro",
    "un",
    "deux",
    "trois",
    "quatre",
    "cinq",
    "six",
    "sept",
    "huit",
    "neuf",
    "dix",
    "onze",
    "douze",
    "treize",
    "quatorze",
    "quinze",
    "seize",
    "dix-sept",
    "dix-huit",
    "dix-neuf",
]
_TENS = {2: "vingt", 3: "trente", 4: "quarante", 5: "cinquante", 6: "soixante"}


def spell(number: int, *, belgian: bool = False, et: str = " et ") -> str:
    """French spelling of 0 to 99, written independently of ``safety.spelled_numbers``."""
    if number < 20:
        return _UNITS[number]
    tens, unit = divmod(number, 10)
    if belgian and tens >= 7:
        base = {7: "septante", 8: "huitante", 9: "nonante"}[tens]
        return base if unit == 0 else base + (et + "un" if unit == 1 else "-" + _UNITS[unit])
    if tens < 7:
        base = _TENS[tens]
        return base if unit == 0 else base + (et + "un" if unit == 1 else "-" + _UNITS[unit])
    if tens == 7:
        return "soixante" + (et + "onze" if unit == 1 else "-" + _UNITS[10 + unit])
    if number == 80:
        return "quatre-vingts"
    return "quatre-vingt-" + _UNITS[number - 80]


@pytest.mark.parametrize("number", range(100))
def test_spelled_numbers_round_trip(number: int) -> None:
    pattern = regex.compile(WORD_PATTERN, regex.IGNORECASE)
    for spelling in {spell(number), spell(number, et="-et-"), spell(number, belgian=True)}:
        assert pattern.fullmatch(spelling), spelling
        assert pattern.fullmatch(spelling.upper()), spelling
        assert word_value(spelling) == number
        assert len(spelling) <= MAX_WORD_LENGTH


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

SCRIPTS = [0x30, 0xFF10, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0x1D7CE, 0x1D7D8, 0x1D7F6]
SEPARATORS = [
    " ", ".", "-", "", "/", " - ", "\u202f", "\u00a0", "\u2009", "\u2007", "\u200b", "\u2060",
    "\t", "\n", "·", "_", "•", "  ", " – ", "\u200e", "\u2066", "‧", "\u3000",
]  # fmt: skip
PREFIXES = ["0{d}", "+33 {d}", "+33{d}", "0033 {d}", "+33 (0){d}", "+33 (0) {d}", "(+33) {d}"]
BEFORE = [
    "Vous pouvez joindre le syndic au ",
    "Son numéro : ",
    "Appelez le ",
    "Le gardien répond au ",
    "",
    "Contact (",
    "**Tél.** ",
]
AFTER = [" du lundi au vendredi.", ".", "", ") en semaine.", ", après 18 heures.", "\n"]


def _in_script(text: str, base: int) -> str:
    return "".join(chr(base + int(char)) if char.isdigit() else char for char in text)


@st.composite
def french_numbers(draw: st.DrawFn) -> str:
    """A French phone number as a model might write it."""
    first = draw(st.integers(1, 9))
    pairs = [f"{draw(st.integers(0, 99)):02d}" for _ in range(4)]
    style = draw(st.sampled_from(["digits", "spelled", "half spelled", "one by one"]))
    if style == "spelled":
        comma = draw(st.sampled_from([", ", " "]))
        words = [
            spell(int(pair)) if pair[0] != "0" else f"zéro {spell(int(pair))}" for pair in pairs
        ]
        return comma.join([f"zéro {spell(first)}", *words])
    if style == "half spelled":
        return f"zéro {spell(first)} " + " ".join(pairs)
    if style == "one by one":
        return " ".join("0" + str(first) + "".join(pairs))
    separator = draw(st.sampled_from(SEPARATORS))
    prefix = draw(st.sampled_from(PREFIXES)).format(d=first)
    text = prefix + separator + separator.join(pairs)
    text = _in_script(text, draw(st.sampled_from(SCRIPTS)))
    if draw(st.booleans()) and text.startswith("0"):
        text = "O" + text[1:]
    return text


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(number=french_numbers(), before=st.sampled_from(BEFORE), after=st.sampled_from(AFTER))
def test_generated_french_numbers_are_masked(number: str, before: str, after: str) -> None:
    masked = mask_numbers(before + number + after).text
    assert number not in masked
    assert masked.startswith(before)
    assert MASK in masked


MONTHS = ["janvier", "mars", "juillet", "décembre"]


@st.composite
def harmless(draw: st.DrawFn) -> str:
    """Dates, times, amounts, references and counts that look like digits but are no phone."""
    day, month = draw(st.integers(1, 28)), draw(st.integers(1, 12))
    year = draw(st.integers(1990, 2030))
    hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    amount = draw(st.integers(1, 999_999))
    n = draw(st.integers(1, 999))
    choices = [
        f"{day:02d}/{month:02d}/{year}",
        f"{day}/{month:02d}/{year % 100:02d}",
        f"{year}-{month:02d}-{day:02d}",
        f"{day:02d}.{month:02d}.{year}",
        f"{day:02d}/{month:02d}",
        f"{day} {draw(st.sampled_from(MONTHS))} {year}",
        f"{hour}h{minute:02d}",
        f"{hour:02d}:{minute:02d}",
        f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00+01:00",
        f"{amount:,}".replace(",", " ") + " €",
        f"{amount:,}".replace(",", "\u202f") + " euros",
        f"{n},{minute:02d} €",
        f"{n} %",
        f"{n} dB(A)",
        f"{n} signalements",
        f"{n} h {minute:02d}",
        f"article R{draw(st.integers(100, 9999))}-{draw(st.integers(1, 30))}",
        f"loi n° {draw(st.integers(10, 99))}-{n}",
        f"arrêté n° {year}-{draw(st.integers(1, 9999)):04d}",
        f"SIREN {draw(st.integers(100, 999))} {n:03d} {draw(st.integers(0, 999)):03d}",
        f"n° 0{draw(st.integers(0, 999_999)):06d}",
        f"PV {year % 100:02d}/0{draw(st.integers(0, 9999)):04d}",
        f"dossier {year}-{draw(st.integers(0, 999_999)):06d}",
        f"{draw(st.integers(10, 95))}{draw(st.integers(0, 999)):03d} Paris",
        f"{n}/{draw(st.integers(1, 10_000))}",
        f"{year}",
    ]
    return draw(st.sampled_from(choices))


@settings(max_examples=400)
@given(item=harmless(), before=st.sampled_from(BEFORE[:5]), after=st.sampled_from(AFTER))
def test_generated_look_alikes_are_kept(item: str, before: str, after: str) -> None:
    text = f"{before}{item}{after}"
    assert mask_numbers(text).text == text


PROSE = [
    "Le voisin du dessus fait du bruit",
    "la nuit",
    "depuis trois semaines",
    "vous pouvez écrire au syndic",
    "Contactez le médiateur",
    "appelez le 112 en cas de danger",
    "le 3114 répond jour et nuit",
    "un chien aboie",
]


@st.composite
def mixed_texts(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(PROSE), french_numbers(), harmless()), min_size=1, max_size=8
        )
    )
    joints = draw(st.lists(st.sampled_from([" ", ", ", ". ", " : ", "\n", " ; "]), min_size=8))
    return "".join(part + joint for part, joint in zip(parts, joints, strict=False))


TRICKY = st.lists(
    st.sampled_from(
        [
            *"0123456789 .-/()+,:Ool\n\u202f\u200b€%",
            *["zéro", "six", "vingt", " et ", "un", "dix", "sept", "le ", "tel:", "n° "],
            *["０", "٦", "𝟎"],
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(mixed_texts(), st.sampled_from(CORPUS_TEXTS)))
def test_masking_is_idempotent(text: str) -> None:
    once = mask_numbers(text).text
    assert mask_numbers(once).text == once


def _check_spans(text: str, masked: str, spans: tuple[tuple[int, int], ...]) -> None:
    rebuilt, cursor = [], 0
    for start, end in spans:
        assert cursor <= start < end <= len(text)
        rebuilt += [text[cursor:start], MASK]
        cursor = end
    rebuilt.append(text[cursor:])
    assert "".join(rebuilt) == masked


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(mixed_texts(), TRICKY, st.text(max_size=80)))
def test_spans_point_into_the_original_text(text: str) -> None:
    masked = mask_numbers(text)
    _check_spans(text, masked.text, masked.spans)
    for start, end in masked.spans:
        assert any(char.isdigit() or char.isalpha() for char in text[start:end])


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(mixed_texts(), TRICKY, st.text(max_size=80), st.sampled_from(CORPUS_TEXTS)),
    data=st.data(),
)
def test_stream_equals_whole_text_for_every_chunking(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=len(text) + 1)))
    bounds = [0, *cuts, len(text)]
    masker = StreamMasker()
    streamed = "".join(masker.feed(text[a:b]) for a, b in pairwise(bounds))
    assert streamed + masker.close() == mask_numbers(text).text
