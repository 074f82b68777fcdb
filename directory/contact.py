"""``Contact``: one number a person can call, validated with ``phonenumbers``.

A contact is national (``region`` is None) or local to a French département. Its number is
written as dialled from France ("18", "116 006", "0 800 47 33 33"): digits and single spaces,
nothing else. Short numbers (up to 6 digits) must be valid French short numbers, longer ones
valid French numbers, according to ``phonenumbers``. The library accepts every national short
number of the directory (112, 15, 17, 18, 114, 115, 119, 191, 196, 197, 3114, 3919, 116 006,
116 117), so there is no allow-list; ``tests/directory/test_national.py`` fails if a future
metadata release disagrees.

Overseas départements have their own numbering plans (+590, +596, +594, +262, +508, +262):
a contact of 971 to 976 may use either a French number or one of its own territory.

The vocabularies (categories, topics) are the detector's, repeated here so that ``directory``
imports nothing of ``safety``; a test checks that they stay identical.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Literal, get_args

import phonenumbers
from phonenumbers import shortnumberinfo
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    computed_field,
    field_validator,
)

__all__ = [
    "CATEGORIES",
    "KINDS",
    "OVERSEAS_REGIONS",
    "TOPICS",
    "Category",
    "Contact",
    "Kind",
    "Topic",
    "fold",
    "is_departement",
]

Category = Literal["danger", "represailles", "detresse"]
# Priority order: the card of the first category comes first.
CATEGORIES: tuple[Category, ...] = ("danger", "detresse", "represailles")
Topic = Literal[
    "gaz", "feu", "co", "electricite", "blessure", "violence", "enfant", "arme", "structure",
    "menace", "suicide", "automutilation",
]  # fmt: skip
TOPICS: tuple[Topic, ...] = get_args(Topic)
Kind = Literal["urgence", "ecoute", "service", "local"]
KINDS: tuple[Kind, ...] = get_args(Kind)

# Overseas départements and the phonenumbers region of their own numbering plan.
OVERSEAS_REGIONS = {"971": "GP", "972": "MQ", "973": "GF", "974": "RE", "975": "PM", "976": "YT"}
SHORT_NUMBER_MAX_DIGITS = 6

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
_NUMBER = re.compile(r"^[0-9]+( [0-9]+)*$")
_DEPARTEMENT = re.compile(r"^(0[1-9]|1[0-9]|2[1-9]|[3-8][0-9]|9[0-5]|2A|2B|97[1-6])$")
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120)]
LongText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=600)]


def fold(name: str) -> str:
    """The key names are compared by: no case, no accents, punctuation as single spaces."""
    decomposed = unicodedata.normalize("NFKD", name.casefold())
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _NOT_ALNUM.sub(" ", bare).strip()


def is_departement(code: str) -> bool:
    """True for a French département code: 01–19, 21–95, 2A, 2B, 971–976."""
    return _DEPARTEMENT.match(code) is not None


def _number_problem(digits: str, region: str | None) -> str | None:
    """Why ``digits`` cannot be dialled from France (or its overseas territory), if it cannot."""
    regions = ["FR"]
    if region in OVERSEAS_REGIONS:
        regions.append(OVERSEAS_REGIONS[region])
    if len(digits) <= SHORT_NUMBER_MAX_DIGITS:
        for code in regions:
            parsed = phonenumbers.parse(digits, code)
            if shortnumberinfo.is_valid_short_number_for_region(parsed, code):
                return None
        return "is not a valid French short number"
    for code in regions:
        try:
            parsed = phonenumbers.parse(digits, code)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number_for_region(parsed, code):
            return None
    return "is not a valid French phone number"


def _canonical(values: tuple[str, ...], order: tuple[str, ...], what: str) -> tuple[str, ...]:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)
    return tuple(v for v in order if v in seen)


class Contact(BaseModel):
    """A number a person can call, and the cards it belongs to.

    Fields are declared so that ``region`` is validated before ``number`` (an overseas
    département accepts its own numbering plan); files and exports use their own order.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: Text
    kind: Kind
    region: str | None = Field(default=None, validate_default=True)
    number: str
    description: LongText
    hours: Text
    categories: tuple[Category, ...]
    topics: tuple[Topic, ...] = ()
    aliases: tuple[Text, ...] = Field(default=(), max_length=20)

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _SLUG.match(value):
            raise ValueError(
                f"bad id {value!r}: a slug of 2 to 63 lowercase letters, digits and hyphens"
            )
        return value

    @field_validator("region")
    @classmethod
    def _departement(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("kind") == "local":
            raise ValueError("a contact of kind 'local' needs a region (département code)")
        if value is not None and not is_departement(value):
            raise ValueError(f"bad département {value!r}: expected 01–19, 21–95, 2A, 2B or 971–976")
        return value

    @field_validator("number")
    @classmethod
    def _dialable(cls, value: str, info: ValidationInfo) -> str:
        if len(value) > 32 or not _NUMBER.match(value):
            raise ValueError(f"malformed number {value!r}: digits and single spaces only")
        problem = _number_problem(value.replace(" ", ""), info.data.get("region"))
        if problem:
            raise ValueError(f"{value!r} {problem}")
        return value

    @field_validator("categories")
    @classmethod
    def _categories(cls, values: tuple[Category, ...]) -> tuple[str, ...]:
        return _canonical(values, CATEGORIES, "category")

    @field_validator("topics")
    @classmethod
    def _topics(cls, values: tuple[Topic, ...]) -> tuple[str, ...]:
        return _canonical(values, TOPICS, "topic")

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        seen: dict[str, str] = {}
        for alias in values:
            key = fold(alias)
            if not key:
                raise ValueError(f"alias {alias!r} has no letter or digit")
            if key in seen:
                raise ValueError(f"alias {alias!r} repeats {seen[key]!r}")
            seen[key] = alias
        return values

    @computed_field  # type: ignore[prop-decorator]
    @property
    def dial(self) -> str:
        """The number as digits only, for ``tel:`` links."""
        return self.number.replace(" ", "")

    def record(self) -> dict[str, object]:
        """The stored fields (without ``dial``), in the order files and exports use."""
        return {
            "id": self.id,
            "name": self.name,
            "number": self.number,
            "kind": self.kind,
            "region": self.region,
            "description": self.description,
            "hours": self.hours,
            "categories": list(self.categories),
            "topics": list(self.topics),
            "aliases": list(self.aliases),
        }
