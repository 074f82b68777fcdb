"""One row per class of number a model writes: masked, or kept, one shot and streamed.

The masker reads numbers structurally (``safety.masking_tokens``): whatever separates the
groups, whatever form the digits take, spelled or not; then each country's numbering metadata
decides (``phonenumbers``). A number counts as leaked when it survives whole or when four of
its digits survive in a row.
"""

from __future__ import annotations

import re

import pytest

from safety.markup import StreamSanitizer, sanitize
from safety.masking import MASK, NATIONAL_NUMBERS, StreamMasker, mask_numbers

# (class, text written by a model, the digits of the number it hides)
MASKED = [
    ("markdown bold inside", "Appelez le **06** 12 34 **56** 78.", "0612345678"),
    ("italics and underscores", "au 06 *12* 34 _56_ 78 le soir", "0612345678"),
    ("strike-through", "au 06 ~~12~~ 34 56 78", "0612345678"),
    ("code span", "au `06 12 34 56 78`", "0612345678"),
    ("HTML tags", "au 06 <b>12</b> 34 <i>56</i> 78", "0612345678"),
    ("non-breaking space entities", "au 06&nbsp;12&nbsp;34&nbsp;56&nbsp;78", "0612345678"),
    ("line break and quote marker", "au 06 12\n> 34 56 78", "0612345678"),
    ("pipes", "au 06|12|34|56|78", "0612345678"),
    ("middle dots", "au 06·12·34·56·78", "0612345678"),
    ("commas", "au 06, 12, 34, 56, 78", "0612345678"),
    ("'puis' between groups", "au 06 12 puis 34 56 78", "0612345678"),
    ("'et' between groups", "au 06 12 34 et 56 78", "0612345678"),
    ("dictated with commas", "c'est le 06, puis 12 34, puis 56 78.", "0612345678"),
    ("dashes said as words", "au 06 tiret 12 tiret 34 tiret 56 tiret 78", "0612345678"),
    ("groups in brackets", "au [06] [12] [34] [56] [78] ;", "0612345678"),
    ("0l for 01", "se joint au 0l 23 45 67 89, porte 3.", "0123456789"),
    ("O for 0, l for 1", "au O6 l2 34 56 78", "0612345678"),
    ("a group as XX", "au 06-XX-71-38-92", "06007138"),
    ("groups as xx", "du type 06 58 xx xx 14", "065800"),
    ("a group as stars", "joignable au 07 43 ** 19 62.", "07430019"),
    ("hidden groups at the end", "le gardien : 06 12 XX XX XX.", "0612"),
    ("groups as dots", "au 06 12 .. .. 78 le soir", "0612"),
    ("a digit and X", "au 06 12 34 56 7X en journée", "06123456"),
    ("emoji keycaps", "au 0️⃣6️⃣1️⃣2️⃣3️⃣4️⃣5️⃣6️⃣7️⃣8️⃣", "0612345678"),
    ("circled digits", "au ⓪⑥①②③④⑤⑥⑦⑧", "0612345678"),
    ("superscript digits", "au ⁰⁶¹²³⁴⁵⁶⁷⁸", "0612345678"),
    ("full-width digits", "au ０６ １２ ３４ ５６ ７８", "0612345678"),
    ("French words", "zéro six, douze, trente-quatre, cinquante-six, soixante-dix-huit", "0612"),
    ("Belgian words", "zéro quatre cent septante-cinq, trente-huit, vingt et un, nonante", "0475"),
    ("Swiss words", "zéro six, douze, huitante, cinquante-six, septante-huit", "0612"),
    ("hundreds in words", "zéro huit cent, quarante-sept, trente, vingt-deux", "0800473022"),
    ("English words", "zero six one two three four five six seven eight", "0612345678"),
    ("plural hundreds, then pairs", "zéro huit cents douze trente-quatre cinquante-six", "0800"),
    ("doubled digits in words", "zero six double zero double zero one two three four", "0600"),
    ("'oh' for zero", "oh seven seven double oh, nine double oh, one two three", "0770"),
    (
        "'plus' for +",
        "composez le plus trente-trois, six, douze, trente-quatre, cinquante-six, vingt",
        "3361",
    ),
    (
        "digits in words, North American",
        "composez le cinq un quatre, cinq cinq cinq, zéro un six deux",
        "5145",
    ),
    ("digits and words mixed", "au 06 douze 34 cinquante-six 78", "0612345678"),
    ("O and words", "O six douze trente-quatre cinquante-six soixante-dix-huit", "0612"),
    ("North American, brackets", "joint au (514) 555-0162, en semaine", "5145550162"),
    ("North American, dashes", "répond au 450-555-0163 en semaine", "4505550163"),
    ("North American, toll-free", "joint au 1 800 555-0172.", "18005550172"),
    ("North American, +1", "au +1 212 555 0148.", "12125550148"),
    ("British national", "au 020 7946 0958 à Londres", "02079460958"),
    ("German national", "au 030 12345678 à Berlin", "03012345678"),
    ("Belgian national", "au 04 340 82 17 à Liège", "043408217"),
    ("Swiss international", "au 0041 22 345 67 89", "0041223456789"),
    ("Luxembourg, no trunk 0", "son numéro est le 621 555 789.", "621555789"),
    ("US emergency to call", "Aux États-Unis, appelez le 911 en cas d'urgence.", "911"),
    ("UK emergency to call", "Au Royaume-Uni, composez le 999.", "999"),
    ("Swiss police to call", "En Suisse, la police se joint au 117 ;", "117"),
    ("Swiss firemen to call", "et les pompiers au 118 ;", "118"),
    ("Belgian police to call", "ou le 101 s'il faut une intervention", "101"),
    ("invented short number", "Appelez le 113 pour les nuisances.", "113"),
    ("invented four digits", "Composez le 1515, jour et nuit.", "1515"),
    ("doubled short number", "appelez le 17 17 tout de suite", "1717"),
    ("an SMS short number", "envoyez un SMS au 31177.", "31177"),
    ("a French service number", "appelez le 3237 pour la pharmacie", "3237"),
]

# (class, text, what stays)
KEPT = [
    *[
        ("national short number", f"En cas d'urgence, appelez le {n}.", n)
        for n in ("112", "15", "17", "18", "114", "115", "119", "3114", "3919", "191", "196")
    ],
    ("national short, spaced", "appelez le 116 006 ou le 116 117", "116 006"),
    ("a date", "Depuis le 14/07/2024, le bruit continue.", "14/07/2024"),
    ("a time", "Le bruit commence à 22 h 30 et finit à 2 h.", "22 h 30"),
    ("a price", "L'amende va jusqu'à 1 500 € pour le tapage.", "1 500 €"),
    ("thousands", "La commune compte 192 000 habitants.", "192 000"),
    ("a postal code and its town", "Vous pouvez joindre le syndic au 10000 Paris.", "10000 Paris"),
    ("a postal code in brackets", "au commissariat de Lyon 3e (69003).", "(69003)"),
    ("a law article", "selon l'article R. 1336-5 du code de la santé publique", "R. 1336-5"),
    ("decibels", "Le bruit atteint 45 dB la nuit.", "45 dB"),
    ("a labelled reference", "Votre plainte porte le n° 2024/004817.", "2024/004817"),
    ("a file's number", "enregistrée sous le numéro 2024/004817 au commissariat", "2024/004817"),
    ("a year after 'le'", "depuis le 2024 au moins", "2024"),
    ("a street number", "le voisin du 12 rue de la Paix", "12 rue"),
    ("a quantity after 'le'", "le 120 décibels mesuré", "120 décibels"),
    ("a 4x4 and a rhythm", "Un 4x4 passe 3x par nuit.", "4x4"),
    ("an ellipsis", "Il a dit... 12 fois.", "12 fois"),
]

_DIGITS = re.compile(r"\D")


def _visible(text: str) -> str:
    return _DIGITS.sub("", text)


def _streamed(text: str, size: int) -> str:
    sanitizer, masker = StreamSanitizer(), StreamMasker()
    pieces = [masker.feed(sanitizer.feed(text[i : i + size])) for i in range(0, len(text), size)]
    return "".join(pieces) + masker.feed(sanitizer.close()) + masker.close()


@pytest.mark.parametrize(("kind", "text", "digits"), MASKED, ids=[k for k, _, _ in MASKED])
def test_a_number_of_each_class_is_masked(kind: str, text: str, digits: str) -> None:
    for output in (mask_numbers(text).text, mask_numbers(sanitize(text).text).text):
        assert MASK in output, kind
        visible = _visible(output)
        assert not any(digits[i : i + 4] in visible for i in range(max(1, len(digits) - 3))), output
        if len(digits) <= 5:  # a short number: none of it may stay
            assert digits not in visible
    one_shot = mask_numbers(sanitize(text).text).text
    for size in (1, 2, 3, 7):
        assert _streamed(text, size) == one_shot


@pytest.mark.parametrize(("kind", "text", "kept"), KEPT, ids=[k for k, _, _ in KEPT])
def test_what_is_not_a_number_to_call_is_kept(kind: str, text: str, kept: str) -> None:
    assert mask_numbers(text).text == text, kind
    assert kept in mask_numbers(sanitize(text).text).text
    for size in (1, 3):
        assert _streamed(text, size) == text


def test_the_national_list_is_what_the_table_keeps() -> None:
    assert {"112", "15", "17", "18", "114", "115", "119", "3114", "3919"} <= NATIONAL_NUMBERS
    assert {"116006", "116117", "191", "196", "197"} <= NATIONAL_NUMBERS
