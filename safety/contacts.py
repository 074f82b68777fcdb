"""Contacts the model names, rendered with numbers from a directory the server trusts.

The model never writes a number: it writes ``[[id]]`` tags, or names a service in plain words
("le SAMU", "les pompiers"). ``render_contacts`` resolves both against a ``ContactBook`` (the
directory snapshot satisfies it structurally; ``safety`` imports nothing of the project) and
shows the directory's number next to the first mention of each contact, as "SAMU (15)" by
default. Unknown tags are removed and reported. Masking (``safety.masking``) runs on the
model's words *before* this, so the numbers injected here are never masked.

``StreamRenderer`` does the same on a stream. It holds back only an unclosed ``[[`` (at most
``TAG_HOLDBACK`` characters) and a tail that is the beginning of a contact's name or alias
(at most the longest of them); anything else goes out at once. For every way of cutting a text
into chunks, its output equals ``render_contacts`` on the whole text (a property test checks it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "TAG_HOLDBACK",
    "ContactBook",
    "ContactLike",
    "Rendered",
    "StreamRenderer",
    "render_contacts",
]

Style = Literal["inline", "name"]
TAG_HOLDBACK = 48
_TAG = re.compile(r"\[\[\s*([A-Za-z0-9_-]{1,64})\s*\]\]")
_ARTICLE = re.compile(r"^(?:le |la |les |l'|un |une |des |du )")


class ContactLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def number(self) -> str: ...
    @property
    def aliases(self) -> Sequence[str]: ...


class ContactBook(Protocol):
    def get(self, contact_id: str) -> ContactLike | None: ...
    @property
    def contacts(self) -> Sequence[ContactLike]: ...


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    contacts: tuple[str, ...]  # ids, in order of first mention
    unknown_tags: tuple[str, ...]


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class _Mentions:
    """A matcher for every name and alias of a book (accent- and case-insensitive)."""

    def __init__(self, book: ContactBook) -> None:
        by_form: dict[str, str] = {}
        for contact in book.contacts:
            for form in (contact.name, *contact.aliases):
                # Without its article ("les pompiers" is "pompiers"): an article would let a
                # short form starting earlier hide a longer one ("le samu" in "le samu social").
                folded = _ARTICLE.sub("", _fold(form).strip())
                if len(folded) >= 3 and not folded.isdigit():
                    by_form.setdefault(folded, contact.id)
        self.by_form = by_form
        self.longest = max((len(f) for f in by_form), default=0)
        # Every beginning of a form, the form included: a tail among them may still grow.
        self.prefixes = frozenset(f[:i] for f in by_form for i in range(1, len(f) + 1))
        forms = sorted(by_form, key=len, reverse=True)
        alternation = "|".join(re.escape(f) for f in forms) or r"(?!)"
        # Matched on folded text, which keeps the original's length (see _fold_same_length).
        self.pattern = re.compile(rf"(?<![\w])(?:{alternation})(?![\w])")


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


class _CharFold(dict[str, str]):
    """One character folded to one character (a memo, bounded by the alphabet in use)."""

    def __missing__(self, char: str) -> str:
        folded = _fold(char)
        one = folded if len(folded) == 1 else char.lower()
        if len(one) != 1:  # a lower case that expands (e.g. "İ"): keep the character
            one = char
        if len(self) < 10_000:
            self[char] = one
        return one


_CHAR_FOLD = _CharFold()


def _fold_same_length(text: str) -> str:
    """Fold character by character, keeping length so that offsets stay valid."""
    if text.isascii():
        return text.lower()
    return "".join(map(_CHAR_FOLD.__getitem__, text))


_MATCHERS: dict[int, tuple[ContactBook, _Mentions]] = {}


def _matcher(book: ContactBook) -> _Mentions:
    cached = _MATCHERS.get(id(book))
    if cached is None or cached[0] is not book:
        if len(_MATCHERS) > 32:
            _MATCHERS.clear()
        cached = (book, _Mentions(book))
        _MATCHERS[id(book)] = cached
    return cached[1]


class _State:
    def __init__(self) -> None:
        self.contacts: list[str] = []
        self.numbered: set[str] = set()
        self.unknown: list[str] = []

    def mention(self, contact_id: str) -> bool:
        """Record a mention; True when this is the first one (the number goes there)."""
        if contact_id not in self.contacts:
            self.contacts.append(contact_id)
        first = contact_id not in self.numbered
        self.numbered.add(contact_id)
        return first


def _label(contact: ContactLike, written: str, show_number: bool, style: Style) -> str:
    if style == "inline" and show_number:
        return f"{written} ({contact.number})"
    return written


def _render_segment(
    text: str,
    book: ContactBook,
    state: _State,
    style: Style,
    end: int | None = None,
    begin: int = 0,
) -> tuple[str, int]:
    """Render ``text[begin:end]``; ``text[:begin]`` is context already rendered (it decides
    word boundaries), and mentions may look one character past ``end``."""
    limit = len(text) if end is None else end
    matcher = _matcher(book)
    folded = _fold_same_length(text)
    out: list[str] = []
    position = begin
    events: list[tuple[int, int, str | None, str]] = []  # start, end, contact id, kind
    for tag in _TAG.finditer(text, begin, limit):
        events.append((tag.start(), tag.end(), tag.group(1), "tag"))
    for found in matcher.pattern.finditer(folded, begin):
        if found.end() > limit:
            break
        if any(s < found.end() and found.start() < e for s, e, _, _ in events):
            continue
        events.append((found.start(), found.end(), matcher.by_form[found.group(0)], "mention"))
    last_mention: str | None = None  # the contact of the previous event, if a mention
    for start, stop, contact_id, kind in sorted(events):
        between = text[position:start]
        contact = book.get(contact_id) if contact_id is not None else None
        if (
            kind == "tag"
            and contact is not None
            and contact.id == last_mention
            and not between.strip()
        ):
            # "les pompiers [[pompiers]]": the tag only confirms the mention just before it.
            position = stop
            last_mention = None
            continue
        out.append(between)
        last_mention = None
        if kind == "tag":
            if contact is None:
                state.unknown.append(contact_id or "")
            else:
                out.append(_label(contact, contact.name, state.mention(contact.id), style))
        elif contact is not None:
            out.append(_label(contact, text[start:stop], state.mention(contact.id), style))
            last_mention = contact.id
        position = stop
    out.append(text[position:limit])
    return "".join(out), limit


def render_contacts(text: str, book: ContactBook, style: Style = "inline") -> Rendered:
    """Resolve ``[[id]]`` tags and plain mentions; numbers come from ``book`` only."""
    state = _State()
    rendered, _ = _render_segment(text, book, state, style)
    return Rendered(rendered, tuple(state.contacts), tuple(state.unknown))


class StreamRenderer:
    """``render_contacts`` on a stream, holding back only what could still change."""

    def __init__(self, book: ContactBook, style: Style = "inline") -> None:
        self._book = book
        self._style = style
        self._state = _State()
        self._buffer = ""
        self._left = ""  # the last character already sent: it decides word boundaries

    def feed(self, chunk: str) -> str:
        self._buffer += chunk
        cut = self._safe_cut()
        if cut <= 0:
            return ""
        left = self._left
        rendered, _ = _render_segment(
            left + self._buffer, self._book, self._state, self._style, len(left) + cut, len(left)
        )
        self._left = self._buffer[cut - 1]
        self._buffer = self._buffer[cut:]
        return rendered

    def close(self) -> str:
        left = self._left
        rendered, _ = _render_segment(
            left + self._buffer, self._book, self._state, self._style, begin=len(left)
        )
        self._buffer = ""
        return rendered

    def _safe_cut(self) -> int:
        """Where the buffer can be cut: before anything that could still become a tag or a
        mention (an open ``[[``, a tail that is the start of a name), never inside one."""
        buffer = self._buffer
        size = len(buffer)
        cut = size
        open_tag = buffer.rfind("[[")
        if open_tag != -1 and buffer.find("]]", open_tag) == -1 and size - open_tag <= TAG_HOLDBACK:
            cut = open_tag
        if buffer.endswith("["):
            cut = min(cut, size - 1)
        matcher = _matcher(self._book)
        folded = _fold_same_length(buffer)
        for start in range(max(0, size - matcher.longest), cut):
            before = folded[start - 1] if start > 0 else _fold_same_length(self._left)
            at_word_start = not before or not _is_word(before)
            if at_word_start and folded[start:] in matcher.prefixes:
                cut = start
                break
        for tag in _TAG.finditer(buffer):
            if tag.start() < cut < tag.end():
                cut = tag.start()
        left = _fold_same_length(self._left)
        context = left + folded
        for found in matcher.pattern.finditer(
            context, max(len(left), len(left) + cut - matcher.longest)
        ):
            found_start, found_end = found.start() - len(left), found.end() - len(left)
            if found_start >= cut:
                break
            # Spanning the cut, or followed only by spaces up to it: a tag confirming this
            # mention may still come, and would then be absorbed into it.
            if found_end > cut or not buffer[found_end:cut].strip():
                cut = found_start
                break
        return cut

    @property
    def contacts(self) -> tuple[str, ...]:
        return tuple(self._state.contacts)

    @property
    def unknown_tags(self) -> tuple[str, ...]:
        return tuple(self._state.unknown)


def names(contacts: Iterable[ContactLike]) -> list[str]:
    """Display names, for logs and tests."""
    return [c.name for c in contacts]
