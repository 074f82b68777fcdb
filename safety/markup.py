"""Markup and links out of what the model writes, in whole texts and in streams.

Nothing a model writes may become code or a link on the phone. ``sanitize`` removes, before the
numbers are masked and the contacts rendered:

- HTML tags and comments, however written: ``<script>``, ``&lt;script&gt;`` (entities),
  ``＜script＞`` (full-width and small forms), ``<img onerror=…>``: dropped;
- markdown images and links, inline (``[ici](javascript:…)``) and by reference (``[ici][1]``
  with its ``[1]: …`` definition): the link's text stays, the target goes;
- code fences (a line of three backticks or tildes, with its language): dropped;
- URIs with a scheme (``javascript:``, ``data:``, ``http://``, ``mailto:``, ``tel:``…, in
  ASCII or full-width letters), ``www.`` addresses, bare domains (``exemple.fr``) and e-mail
  addresses: each becomes ``[lien retiré]``.

The directory's contacts are not links: the ``[[id]]`` tags are left for the renderer.

``StreamSanitizer`` gives exactly ``sanitize``'s result for every chunking: it emits text where
no construct can start, and holds back from the start of a construct that more text could
complete or extend, at most ``MAX_HOLDBACK`` characters (every construct has a bounded length).
"""

from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass
from typing import Final

import regex

__all__ = [
    "LINK_REMOVED",
    "MAX_HOLDBACK",
    "Sanitized",
    "StreamSanitizer",
    "markup_kinds",
    "sanitize",
]

#: What replaces a link, a URI, a domain or an e-mail address.
LINK_REMOVED: Final = "[lien retiré]"


def _letters(word: str) -> str:
    """``word`` matched in ASCII or full-width letters, any case."""
    return "".join(
        f"[{c.lower()}{c.upper()}{chr(ord(c.lower()) + 0xFEE0)}{chr(ord(c.upper()) + 0xFEE0)}]"
        for c in word
    )


_LT = r"(?:<|＜|﹤|&lt;|&#0*60;|&#x0*3c;)"
_GT = r"(?:>|＞|﹥|&gt;|&#0*62;|&#x0*3e;)"
_SCHEMES = (
    "javascript", "vbscript", "data", "file", "https", "http", "ftp", "mailto", "tel", "sms",
    "callto", "intent", "blob", "about", "wss", "ws",
)  # fmt: skip
_COLON = r"[:：]"
_TLDS = r"(?:fr|com|org|net|eu|be|ch|ca|info|io|gouv|app|xyz|ly|me|co|us|uk|de|site|online)"
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,40}[a-z0-9])?"
# A URI runs to a space, a quote or a bracket; a bracketed part inside it ("alert(1)") is its own.
_URI_CHARS = r"[^\s<>\"'`()\[\]]"
_URI_TAIL = rf"{_URI_CHARS}{{0,300}}(?:\([^\s()]{{0,100}}\){_URI_CHARS}{{0,100}}){{0,2}}"
# A link's target, with bracketed parts inside it ("javascript:alert(1)").
_TARGET = r"[^()\n]{0,300}(?:\([^()\n]{0,100}\)[^()\n]{0,100}){0,2}"

_PARTS = {
    # A code fence: three backticks or tildes and the language after them.
    "fence": r"(?:```|~~~)[^\s`~]{0,30}",
    # An HTML tag or comment, a start or an end tag, in any of its encodings.
    "tag": rf"{_LT}\s{{0,3}}(?:/\s{{0,3}})?[a-z!?][^<>＜＞﹤﹥\n]{{0,300}}?{_GT}",
    "image": rf"!\[(?P<alt>[^\[\]\n]{{0,200}})\]\({_TARGET}\)",
    "link": rf"(?<!\[)\[(?!\[)(?P<text>[^\[\]\n]{{0,200}})\]\({_TARGET}\)",
    "reflink": r"(?<!\[)\[(?!\[)(?P<ref_text>[^\[\]\n]{1,200})\]\[[^\[\]\n]{0,60}\]",
    "refdef": r"(?<![^\n])[ \t]{0,3}\[[^\[\]\n]{1,60}\]:[ \t]*\S{1,300}",
    "email": r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,4}",
    "uri": rf"(?<![\w-])(?:{'|'.join(_letters(s) for s in _SCHEMES)}){_COLON}{_URI_TAIL}",
    "www": rf"(?<![\w-])[wW]{{3}}\.{_URI_TAIL}",
    "domain": rf"(?<![\w@.-])(?:{_LABEL}\.){{1,4}}{_TLDS}(?![\w-])(?:/{_URI_TAIL})?",
}
_FLAGS = regex.IGNORECASE | regex.VERSION0
_MARKUP = regex.compile(
    "|".join(f"(?P<{name}>{source})" for name, source in _PARTS.items()), _FLAGS
)
# Each construct on its own, to ask whether one of them could still start at a position.
_ONE = {name: regex.compile(source, _FLAGS) for name, source in _PARTS.items()}
# Constructs that start with a mark, and the marks; the others (URIs, addresses, domains)
# hold no white space, so only the text's last word can be the start of one still coming.
_MARKED = ("fence", "tag", "image", "link", "reflink", "refdef")
_WORDY = tuple(name for name in _PARTS if name not in _MARKED)
_MARKS = regex.compile(r"[\[!<＜﹤&`~]|(?<![^\n])[ \t]")
_LAST_WORD = regex.compile(r"\S*\Z")
_WORD_START = regex.compile(r"(?<!\w)\S")

#: Upper bound of the text a ``StreamSanitizer`` holds back after ``feed`` returns: the
#: longest construct, an image or a link whose target has two bracketed parts
#: (2 + 200 + 2 + 300 + 2 x (102 + 100) + 1 characters).
MAX_HOLDBACK: Final = 2 + 200 + 2 + 300 + 2 * (102 + 100) + 1
#: Characters of already processed text kept for the lookbehinds (line starts, "[[").
_CONTEXT = 1


@dataclass(frozen=True)
class Sanitized:
    text: str
    removed: int  # constructs removed or replaced


def _replacement(match: regex.Match[str]) -> str:
    kind = match.lastgroup
    if kind in ("fence", "tag", "refdef"):
        return ""
    if kind in ("image", "link", "reflink"):
        inner = match.group("alt" if kind == "image" else "text" if kind == "link" else "ref_text")
        return sanitize(inner).text  # the text of a link may itself hold a URI
    return LINK_REMOVED


#: Each construct's name, as the output validation reports it (in French, for the retry).
KINDS: Final = {
    "fence": "bloc de code",
    "tag": "balise HTML",
    "image": "image markdown",
    "link": "lien markdown",
    "reflink": "lien markdown",
    "refdef": "lien markdown",
    "email": "adresse e-mail",
    "uri": "lien web",
    "www": "lien web",
    "domain": "lien web",
}


def markup_kinds(text: str) -> list[str]:
    """The kinds of markup in ``text``, read after NFKC and HTML entity decoding (so that
    "&lt;script&gt;" and "＜script＞" are tags), in order of first appearance."""
    normal = html.unescape(unicodedata.normalize("NFKC", text))
    found: list[str] = []
    for match in _MARKUP.finditer(normal):
        kind = KINDS[match.lastgroup or "tag"]
        if kind not in found:
            found.append(kind)
    return found


def sanitize(text: str) -> Sanitized:
    """``text`` with its markup, links and URIs removed (see the module's docstring)."""
    removed = 0

    def swap(match: regex.Match[str]) -> str:
        nonlocal removed
        removed += 1
        return _replacement(match)

    return Sanitized(_MARKUP.sub(swap, text), removed)


class StreamSanitizer:
    """Incremental ``sanitize``: ``feed`` what the model streams, ``close`` at the end."""

    def __init__(self) -> None:
        self._context = ""  # the last processed character (original text), for lookbehinds
        self._pending = ""
        self._closed = False
        self.removed = 0

    def feed(self, chunk: str) -> str:
        if self._closed:
            return ""
        self._pending += chunk
        return self._advance(final=False)

    def close(self) -> str:
        if self._closed:
            return ""
        out = self._advance(final=True)
        self._closed = True
        return out

    def _advance(self, *, final: bool) -> str:
        buf = self._context + self._pending
        pos = len(self._context)
        out: list[str] = []
        while pos < len(buf):
            found = _MARKUP.search(buf, pos)  # complete constructs only
            limit = found.start() if found is not None else len(buf)
            if not final:
                held = _undecided(buf, pos, limit)
                if held is None and found is not None and not _settled(buf, found):
                    held = found.start()  # complete, but more text could extend it
                if held is not None:
                    out.append(buf[pos:held])
                    pos = held
                    break
            if found is None:
                out.append(buf[pos:])
                pos = len(buf)
                break
            out += [buf[pos : found.start()], _replacement(found)]
            self.removed += 1
            pos = found.end()
        self._pending = buf[pos:]
        self._context = buf[max(0, pos - _CONTEXT) : pos]
        return "".join(out)


_SPACE = regex.compile(r"\s")


def _settled(buf: str, match: regex.Match[str]) -> bool:
    """True when no text after ``buf`` can change ``match``. A construct without white space
    (a URI, an address, a domain, a reference definition's target) may take in what follows
    until a white space ("javascript:alert" then "(1)"); the others end on their own mark."""
    if match.lastgroup in (*_WORDY, "refdef"):
        return _SPACE.search(buf, match.end()) is not None
    end: int = match.end()
    return end < len(buf)


def _undecided(buf: str, start: int, limit: int) -> int | None:
    """The first position in ``[start, limit]`` where a construct could begin that the text
    so far neither completes nor rules out (it reaches the end of ``buf``); None if none.

    Only the last ``MAX_HOLDBACK`` characters can hold one (every construct is bounded), only
    marks can start a marked one, and only the last word a wordy one."""
    window = max(start, len(buf) - MAX_HOLDBACK)
    candidates = {m.start() for m in _MARKS.finditer(buf, window, limit + 1)}
    word = _LAST_WORD.search(buf, window)
    first = max(window, word.start() if word else len(buf))
    # Every wordy construct starts after a character that is not part of a word.
    wordy = {m.start() for m in _WORD_START.finditer(buf, first, min(limit, len(buf) - 1) + 1)}
    for position in sorted(candidates | wordy):
        names = _MARKED if position in candidates else ()
        if position in wordy:
            names = (*names, *_WORDY)
        for name in names:
            match = _ONE[name].match(buf, position, partial=True)
            if match is not None and match.partial:
                return int(position)
    return None
