"""Which digits of one cluster are phone numbers: the library finds them, context decides.

``plan_cluster`` reads a cluster and the masked text before it (at most ``LEFT_CONTEXT``
characters). It returns a ``Plan``: the spans to mask for sure, and the short service numbers
presented as something to call, which ``finish`` masks unless the text right after the cluster
(at most ``RIGHT_CONTEXT`` characters) makes them a quantity ("le 3000 €"). Only a plan with
such short numbers reads the right context (``Plan.needs_right``).

Passes over the digit groups of the normalised cluster, in order: a ``tel:`` link masks all;
``PhoneNumberMatcher`` (region FR, leniency POSSIBLE); windows of consecutive groups checked
with ``phonenumbers.is_possible_number`` (numbers glued together, foreign national formats);
short numbers checked with ``phonenumbers.shortnumberinfo``. A group used by one pass is not
used again. Numbers written without their 0 or +33, references presented as references and
dates are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import phonenumbers
import regex
from phonenumbers import Leniency, PhoneNumberMatcher, shortnumberinfo

from safety.masking_context import (
    ANNOUNCED,
    LEFT_CONTEXT,
    REFERENCE_LABEL,
    RIGHT_CONTEXT,
    TEL_LINK,
    TOWN_AFTER,
    UNIT_AFTER,
    VERBAL_CALL_CUE,
    is_call_cue,
)
from safety.masking_tokens import (
    GLUE_WORDS,
    STRONG_SEPARATOR,
    NormalizedCluster,
    normalize_cluster,
    token_extent,
)
from safety.spelled_numbers import WORD_PATTERN

#: What replaces each masked number.
MASK = "[numéro masqué]"

_GROUP = regex.compile(r"\+?\d+")
_DICTATED = regex.compile(rf"(?<![^\W_])(?:{'|'.join(GLUE_WORDS)})(?![^\W_])", regex.IGNORECASE)
_MISSING_ZERO = regex.compile(r"\(?[1-9](?:[ .]\d\d){4}")
# A French number in its usual layout, "0X XX XX XX XX" or compact: masked even after a label.
_FRENCH_LAYOUT = regex.compile(r"\(?0[1-9](?P<sep>[ .-]?)\d\d(?:(?P=sep)\d\d){3}")
_YEAR = regex.compile(r"(?:19|20)\d\d")
_ONE_WORD = regex.compile(WORD_PATTERN, regex.IGNORECASE | regex.VERSION0)
_SHORT_LENGTHS = (4, 6)
# Bounds the work of the matcher on long clusters; the window pass covers what it gives up.
_MATCHER_TRIES = 16
# Longer clusters hold several numbers, which the matcher does not split: windows do.
_MATCHER_MAX_DIGITS = 17


def _tight(glue: str) -> bool:
    """Glue that makes two groups one figure: "100,00", "2024-3237", "100/1" (not "117, 118")."""
    return bool(glue) and not any(char.isspace() or char in "()" for char in glue)


@dataclass(frozen=True)
class Plan:
    """Decisions on one cluster; ``shorts`` still depend on the right context."""

    cluster: str
    offset: int
    left: str
    allowed: frozenset[str]
    spans: tuple[tuple[int, int], ...]
    shorts: tuple[tuple[int, int], ...]

    @property
    def needs_right(self) -> bool:
        """True when ``finish`` reads the text after the cluster."""
        return bool(self.shorts)


@dataclass
class _Group:
    start: int
    end: int
    digits: str
    plus: bool
    used: bool = False
    masked: bool = False


@lru_cache(maxsize=4096)
def _possible(digits: str, international: bool) -> bool:
    try:
        if international:
            number = phonenumbers.parse("+" + (digits[2:] if digits.startswith("00") else digits))
        else:
            number = phonenumbers.parse(digits, "FR")
        return bool(phonenumbers.is_possible_number(number))
    except phonenumbers.NumberParseException:
        return False


# Neighbours whose national numbers, written with their trunk 0, a model may give: their
# numbering metadata decides whether a run of digits could be one of theirs.
_NEIGHBOURS = ("BE", "CH", "LU", "MC", "DE", "GB", "IT", "ES", "PT", "NL", "AT")


@lru_cache(maxsize=4096)
def _possible_abroad(digits: str) -> bool:
    """True when ``digits`` (with a trunk 0) could be a national number of a neighbour."""
    for region in _NEIGHBOURS:
        try:
            if phonenumbers.is_possible_number(phonenumbers.parse(digits, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


@lru_cache(maxsize=4096)
def _valid_short(digits: str) -> bool:
    if _YEAR.fullmatch(digits):
        return False  # "2020" is also a short number, but a year first
    try:
        number = phonenumbers.parse(digits, "FR")
        return bool(shortnumberinfo.is_valid_short_number_for_region(number, "FR"))
    except phonenumbers.NumberParseException:
        return False


class _ClusterPlanner:
    def __init__(self, cluster: str, offset: int, left: str, allowed: frozenset[str]) -> None:
        self.cluster = cluster
        self.offset = offset
        self.left = left
        self.before = left + cluster  # text from (offset - len(left)), masked before the cluster
        self.before_offset = offset - len(left)
        self.allowed = allowed
        self.norm: NormalizedCluster = normalize_cluster(cluster, offset)
        view = self.norm.digits_view
        self.groups = [
            _Group(m.start(), m.end(), m.group().lstrip("+"), m.group().startswith("+"))
            for m in _GROUP.finditer(view)
        ]
        self.spans: list[tuple[int, int]] = []
        self.shorts: list[tuple[int, int]] = []

    # -- helpers -----------------------------------------------------------------------------
    def _left_of(self, original: int) -> str:
        end = original - self.before_offset
        return self.before[max(0, end - LEFT_CONTEXT) : end]

    def _mask(self, start: int, end: int) -> None:
        for group in self.groups:
            if group.start < end and start < group.end:
                group.masked = True
        view = self.norm.digits_view
        opened = view[start:end].count("(") - view[start:end].count(")")
        if opened < 0 and start > 0 and view[start - 1] == "(":
            start -= 1  # "(+33) 6 ..." is masked with its bracket
        while opened > 0 and view[start] in "( " and start < end - 1:
            opened -= view[start] == "("
            start += 1  # "(+33 6 ..." without a closing bracket keeps its bracket
        self.spans.append(self.norm.span(start, end))

    def _use(self, start: int, end: int) -> None:
        for group in self.groups:
            if group.start < end and start < group.end:
                group.used = True

    def _is_reference(self, start: int, end: int) -> bool:
        """True when a label presents the number as a reference ("SIREN", "n°", "PC")."""
        if _FRENCH_LAYOUT.fullmatch(self.norm.digits_view[start:end]):
            return False
        return REFERENCE_LABEL.search(self._left_of(self.norm.starts[start])) is not None

    # -- passes ------------------------------------------------------------------------------
    def tel_link(self) -> bool:
        if TEL_LINK.search(self._left_of(self.offset)) is None:
            return False
        digits = "".join(group.digits for group in self.groups)
        if len(digits) >= 3 and digits not in self.allowed:
            self._mask(self.groups[0].start, self.groups[-1].end)
        return True

    def matcher(self) -> None:
        view = self.norm.digits_view
        try:
            matches = list(PhoneNumberMatcher(view, "FR", Leniency.POSSIBLE, _MATCHER_TRIES))
        except Exception:  # the library must never make masking fail
            return
        for match in matches:
            raw = match.raw_string
            digits = "".join(char for char in raw if char.isdigit())
            plus = raw.lstrip("(").startswith("+")
            self._use(match.start, match.end)
            if not self._keeps(match.start, match.end, plus, digits):
                self._mask(match.start, match.end)

    def north_american(self) -> None:
        """Numbers of the North American plan ("(514) 555-0162", "1 800 555-0172"): no 0 or
        + to start them, so the French passes keep them. The plan's own metadata decides: a
        valid area code and exchange, and digits grouped as the plan formats its numbers
        (``Leniency.EXACT_GROUPING``: "2 345 678 901 €" is not grouped as a phone number)."""
        view = self.norm.digits_view
        try:
            matches = list(PhoneNumberMatcher(view, "US", Leniency.EXACT_GROUPING, _MATCHER_TRIES))
        except Exception:  # the library must never make masking fail
            return
        for match in matches:
            digits = "".join(char for char in match.raw_string if char.isdigit())
            covered = [g for g in self.groups if g.start < match.end and match.start < g.end]
            if len(digits) < 10 or digits.startswith("0") or any(g.used for g in covered):
                continue
            self._use(match.start, match.end)
            if not self._is_reference(match.start, match.end):
                self._mask(match.start, match.end)

    def _keeps(self, start: int, end: int, plus: bool, digits: str) -> bool:
        """True when a number the library accepts is written as something other than a phone."""
        if plus:
            return False
        if digits.startswith("00"):  # too short for 00 + country code + number: "n° 0049000"
            return len(digits) < 10 or self._is_reference(start, end)
        if digits.startswith("0") or _MISSING_ZERO.fullmatch(self.norm.digits_view[start:end]):
            return self._is_reference(start, end)
        return True  # "443 061 841": French numbers are written with their 0 or +33

    def _crossable(self, left: _Group, right: _Group) -> bool:
        glue = self.norm.digits_view[left.end : right.start]
        if right.plus or "x" in glue:
            return False
        if "," not in glue:
            return True
        # A comma separates two numbers ("117, 118"), unless the groups are dictated
        # ("06, puis 00 00, puis 31 42").
        start = self.norm.ends[left.end - 1] - self.offset
        end = self.norm.starts[right.start] - self.offset
        return _DICTATED.search(self.cluster[start:end]) is not None

    def _strong_start(self, index: int) -> bool:
        if index == 0 or self.groups[index].plus or self.groups[index - 1].used:
            return True
        if "x" in self.norm.digits_view[self.groups[index - 1].end : self.groups[index].start]:
            return True  # a date stands between
        start = self.norm.ends[self.groups[index - 1].end - 1]
        end = self.norm.starts[self.groups[index].start]
        glue = self.cluster[start - self.offset : end - self.offset]
        return STRONG_SEPARATOR.search(glue) is not None

    def _window(self, index: int) -> int | None:
        first = self.groups[index]
        international = first.plus or first.digits.startswith("00")
        digits = ""
        best: int | None = None
        abroad: int | None = None
        for last in range(index, len(self.groups)):
            group = self.groups[last]
            if last > index and (group.used or not self._crossable(self.groups[last - 1], group)):
                break
            digits += group.digits
            if international:
                if len(digits) > 17:
                    break
                if len(digits) >= 7 and _possible(digits, True):
                    best = last
            else:
                if len(digits) > 12:
                    break
                if 9 <= len(digits) <= 10 and _possible(digits, False):
                    best = last
                elif (
                    best is None
                    and len(digits) >= 10
                    and digits.startswith("0")
                    and _possible_abroad(digits)
                ):
                    abroad = last  # a neighbour's number, unless a French one reads first
        return best if best is not None else abroad

    def _in_pairs(self, first: int, last: int) -> bool:
        """True for the usual French layouts, "0X XX XX XX XX" or ten digits in one group."""
        groups = self.groups[first : last + 1]
        if len(groups) == 1:
            return len(groups[0].digits) == 10
        if len(groups) != 5 or any(len(group.digits) != 2 for group in groups):
            return False
        view = self.norm.digits_view
        glues = {view[a.end : b.start] for a, b in pairwise(groups)}
        return len(glues) == 1

    def announced(self) -> None:
        """A number without 0 or + that a verb or "numéro" presents as one to call ("son
        numéro est le 621 555 789"): masked when a neighbour's plan (Luxembourg has no trunk
        0) says it could be one of theirs."""
        groups = self.groups
        for index, group in enumerate(groups):
            # Groups the French passes kept (used, not masked) may still be announced.
            if group.masked or group.plus or group.digits.startswith("0"):
                continue
            left = self._left_of(self.norm.starts[group.start])
            if ANNOUNCED.search(left) is None:
                continue
            digits, best = "", None
            for last in range(index, len(groups)):
                if last > index and (
                    groups[last].masked or not self._crossable(groups[last - 1], groups[last])
                ):
                    break
                digits += groups[last].digits
                if len(digits) > 12:
                    break
                if len(digits) >= 8 and _possible_abroad(digits):
                    best = last
            if best is not None and not self._is_reference(group.start, groups[best].end):
                for covered in groups[index : best + 1]:
                    covered.used = True
                self._mask(group.start, groups[best].end)

    def windows(self) -> None:
        for index, group in enumerate(self.groups):
            if group.used or not (group.plus or group.digits.startswith("0")):
                continue
            last = self._window(index)
            if last is None or not (self._strong_start(index) or self._in_pairs(index, last)):
                continue
            digits = "".join(g.digits for g in self.groups[index : last + 1])
            end = self.groups[last].end
            for covered in self.groups[index : last + 1]:
                covered.used = True
            if not self._keeps(group.start, end, group.plus, digits):
                self._mask(group.start, end)

    def spoken_pairs(self) -> None:
        """A French number read out in pairs with commas ("06, 12, 34, 56, 78"): five groups of
        two digits, the first a 0X, with the same glue between each, and a possible number.
        Elsewhere a comma separates two numbers ("117, 118"), which is why the window pass
        does not cross it."""
        groups, view = self.groups, self.norm.digits_view
        for index in range(len(groups) - 4):
            run = groups[index : index + 5]
            if any(g.used or len(g.digits) != 2 for g in run) or not run[0].digits.startswith("0"):
                continue
            glues = {view[a.end : b.start] for a, b in pairwise(run)}
            digits = "".join(g.digits for g in run)
            if len(glues) == 1 and "," in next(iter(glues)) and _possible(digits, False):
                for group in run:
                    group.used = True
                self._mask(run[0].start, run[-1].end)

    def _standalone(self, first: int, last: int) -> bool:
        """False when the groups are glued to neighbours ("2024-3237", "R623-2") or are part of
        a figure written in thousands ("192 000 €", "1 500")."""
        view, groups = self.norm.text, self.groups  # slashes kept: "100/1" is a ratio
        if groups[first].plus:
            return False
        nxt = groups[last + 1] if last + 1 < len(groups) else None
        if nxt and len(nxt.digits) == 3 and view[groups[last].end : nxt.start] == " ":
            return False
        prev = groups[first - 1] if first > 0 else None
        if prev and len(groups[first].digits) == 3 and view[prev.end : groups[first].start] == " ":
            return False
        before = groups[first - 1] if first > 0 else None
        if before and not before.masked and _tight(view[before.end : groups[first].start]):
            return False
        after = groups[last + 1] if last + 1 < len(groups) else None
        return not (after and not after.masked and _tight(view[groups[last].end : after.start]))

    def short_numbers(self) -> None:
        index = 0
        groups = self.groups
        while index < len(groups):
            group = groups[index]
            if group.used:
                index += 1
                continue
            last = index
            digits = group.digits
            if index + 1 < len(groups) and not groups[index + 1].used:
                nxt = groups[index + 1]
                pair = digits + nxt.digits
                spaced = self.norm.text[group.end : nxt.start] == " "  # not "32/10"
                shape = (len(group.digits), len(nxt.digits))
                if spaced and (
                    (shape in ((1, 3), (3, 3)) and pair in self.allowed)
                    or (shape == (3, 3) and _valid_short(pair))
                    or (shape == (2, 2) and pair.startswith("3") and _valid_short(pair))
                    or (shape == (2, 2) and pair not in self.allowed and self._called(index))
                ):
                    last, digits = index + 1, pair  # "116 117", "118 712", "39 39", "17 17"
            if digits in self.allowed:
                pass
            elif (
                self._short_shape(digits)
                and self._standalone(index, last)
                and self._called(index, verbal=len(digits) == 5)
            ):
                self.shorts.append(self.norm.span(group.start, groups[last].end))
            index = last + 1

    def _called(self, index: int, *, verbal: bool = False) -> bool:
        left = self._left_of(self.norm.starts[self.groups[index].start])
        return VERBAL_CALL_CUE.search(left) is not None if verbal else is_call_cue(left)

    @staticmethod
    def _short_shape(digits: str) -> bool:
        """A number presented as something to call that is not in the national list is
        masked like any other: French short numbers (3xxx, 118xxx), and foreign or invented
        ones ("911", "117", "31177", "1515"). Years ("le 2024") are not numbers to call."""
        if len(digits) in _SHORT_LENGTHS and _valid_short(digits):
            return True
        return 3 <= len(digits) <= 6 and digits[0] != "0" and _YEAR.fullmatch(digits) is None

    def plan(self) -> Plan:
        total = sum(len(group.digits) for group in self.groups)
        if self.groups and not self.tel_link() and total >= 3:
            if 7 <= total <= _MATCHER_MAX_DIGITS:
                self.matcher()
            if total >= 7:
                self.windows()
                self.spoken_pairs()
            if 10 <= total <= _MATCHER_MAX_DIGITS:
                self.north_american()
            if total >= 8:
                self.announced()
            self.short_numbers()
        spans, shorts = tuple(self.spans), tuple(self.shorts)
        return Plan(self.cluster, self.offset, self.left, self.allowed, spans, shorts)


def plan_cluster(cluster: str, offset: int, left: str, allowed: frozenset[str]) -> Plan:
    """Decide on ``cluster`` (at ``offset`` in the text), ``left`` being the text before it.

    ``left`` is the already masked text before the cluster. When numbers are masked, the
    digits between them are decided again on their own, with the masks to their left, as
    masking the masked text again would see them: this makes masking idempotent.
    """
    left = left[-LEFT_CONTEXT:]
    if (len(cluster) <= 2 and cluster.isdigit()) or _ONE_WORD.fullmatch(cluster):
        return Plan(cluster, offset, left, allowed, (), ())  # "15", "un": two digits at most
    plan = _ClusterPlanner(cluster, offset, left, allowed).plan()
    if not plan.spans:
        return plan
    masks = _merged(list(plan.spans))
    spans: list[tuple[int, int]] = list(masks)
    shorts: list[tuple[int, int]] = []
    for sub in _gap_plans(plan, masks):
        spans.extend(sub.spans)
        shorts.extend(sub.shorts)
    return Plan(cluster, offset, left, allowed, tuple(_merged(spans)), tuple(shorts))


def _gap_plans(plan: Plan, masks: list[tuple[int, int]]) -> Iterator[Plan]:
    """Plans of the runs of tokens between ``masks``, each with the masked text to its left."""
    cluster, offset = plan.cluster, plan.offset
    masked_left, cursor = plan.left, offset
    end = offset + len(cluster)
    for mask_start, mask_end in [*masks, (end, end)]:
        gap = cluster[cursor - offset : mask_start - offset]
        extent = token_extent(gap)
        if extent is not None:
            sub_start, sub_end = cursor + extent[0], cursor + extent[1]
            sub_left = masked_left + cluster[cursor - offset : sub_start - offset]
            sub_text = cluster[sub_start - offset : sub_end - offset]
            yield plan_cluster(sub_text, sub_start, sub_left, plan.allowed)
        masked_left = (masked_left + gap + MASK)[-LEFT_CONTEXT:]
        cursor = mask_end


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def finish(plan: Plan, right: str) -> list[tuple[int, int]]:
    """Spans to mask, sorted and disjoint; ``right`` is the text after the cluster.

    Short numbers followed by a unit are kept; the others are masked, and the text around them
    is decided again as in ``plan_cluster``.
    """
    accepted = []
    for start, end in plan.shorts:
        after = (plan.cluster[end - plan.offset :] + right)[:RIGHT_CONTEXT]
        if UNIT_AFTER.match(after) is not None:
            continue  # a quantity: "le 3000 €", "le 120 décibels"
        if sum(
            char.isdigit() for char in plan.cluster[start - plan.offset : end - plan.offset]
        ) == 5 and TOWN_AFTER.match(after):
            continue  # a postal code and its town
        accepted.append((start, end))
    if not accepted:
        return _merged(list(plan.spans))
    masks = _merged([*plan.spans, *accepted])
    spans = list(masks)
    for sub in _gap_plans(plan, masks):
        after = plan.cluster[sub.offset + len(sub.cluster) - plan.offset :]
        spans.extend(finish(sub, (after + right)[:RIGHT_CONTEXT]))
    return _merged(spans)
