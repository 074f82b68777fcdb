"""Contacts files: read a YAML list of contacts, validated whole, and write it back.

A file is a YAML sequence of mappings with the fields of ``Contact``. It is read through
``yaml.compose`` so that every problem names its line; scalars are taken as written (``region:
01`` is the département "01", ``number: 18`` the number "18"), so quotes are never needed.
The first problem raises ``ContactFileError``; nothing is returned from a file that has one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from directory.contact import Contact

__all__ = ["ContactFileError", "Scope", "dump_contacts", "parse_contacts", "read_contacts_file"]

# "local": every contact needs a region; "national": none may have one; "any": both.
Scope = Literal["local", "national", "any"]
_NULL_TAG = "tag:yaml.org,2002:null"
_MAX_DEPTH = 6  # a contact is a mapping of lists of scalars; deeper is a mistake (or a loop)

Value = str | None | list["Value"] | dict[str, "Value"]


class ContactFileError(ValueError):
    """A contacts file that cannot be used as a whole; names the file, line, id and reason."""

    def __init__(self, source: str, line: int | None, contact_id: str | None, reason: str):
        self.source = source
        self.line = line
        self.contact_id = contact_id
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        who = f" contact {contact_id!r}:" if contact_id else ""
        super().__init__(f"{where}:{who} {reason}")


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Mapping:
    """One contact mapping of the file: its values as written, and where each one is."""

    def __init__(self, source: str, node: yaml.MappingNode, depth: int = 0):
        self.node = node
        self.values: dict[str, Value] = {}
        self.keys: dict[str, yaml.Node] = {}
        self.nodes: dict[str, yaml.Node] = {}
        self.contact_id = next(
            (
                str(v.value)
                for k, v in node.value
                if isinstance(k, yaml.ScalarNode) and k.value == "id"
                if isinstance(v, yaml.ScalarNode) and v.tag != _NULL_TAG
            ),
            None,
        )
        for key_node, value_node in node.value:
            key = _plain(source, key_node)
            if not isinstance(key, str):
                raise self.error(source, "a field name must be text", node=key_node)
            if key in self.keys:
                raise self.error(source, f"field {key!r} given twice", node=key_node)
            self.keys[key], self.nodes[key] = key_node, value_node
            self.values[key] = _plain(source, value_node, depth + 1)

    def line_of(self, loc: tuple[int | str, ...]) -> int:
        """The line of the value a pydantic error location points at (the mapping's if none)."""
        if not loc or not isinstance(loc[0], str) or loc[0] not in self.keys:
            return _line(self.node)
        node = self.nodes[loc[0]]
        index = loc[1] if len(loc) > 1 else None
        items = node.value if isinstance(node, yaml.SequenceNode) else []
        if isinstance(index, int) and index < len(items):
            return _line(items[index])
        return _line(node)

    def error(
        self,
        source: str,
        reason: str,
        loc: tuple[int | str, ...] = (),
        node: yaml.Node | None = None,
    ) -> ContactFileError:
        line = _line(node) if node is not None else self.line_of(loc)
        return ContactFileError(source, line, self.contact_id, reason)


def _plain(source: str, node: yaml.Node, depth: int = 0) -> Value:
    """The value of a node with every scalar as written (a string), or None for null."""
    if depth > _MAX_DEPTH:
        raise ContactFileError(source, _line(node), None, "values nested too deeply")
    if isinstance(node, yaml.ScalarNode):
        return None if node.tag == _NULL_TAG else str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return [_plain(source, item, depth + 1) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        return _Mapping(source, node, depth + 1).values
    raise ContactFileError(source, _line(node), None, "unexpected YAML node")


def _reason(error: ErrorDetails) -> str:
    field = ".".join(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown field {field!r}"
    if kind == "missing":
        return f"missing field {field!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{field}: {message}" if field else message


def _contact(source: str, mapping: _Mapping, scope: Scope) -> Contact:
    try:
        contact = Contact.model_validate(mapping.values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise mapping.error(source, _reason(first), tuple(first["loc"])) from exc
    if scope == "local" and contact.region is None:
        raise mapping.error(
            source, "a local contact needs a region (département code)", ("region",)
        )
    if scope == "national" and contact.region is not None:
        raise mapping.error(source, "a national contact has no region", ("region",))
    return contact


def parse_contacts(
    text: str,
    source: str,
    *,
    scope: Scope = "local",
    reserved_ids: Iterable[str] = (),
) -> list[Contact]:
    """Validate a whole contacts document; raise ``ContactFileError`` on its first problem.

    ``reserved_ids`` are ids a contact of this file may not take (the national ones, for a
    file of local contacts).
    """
    reserved = frozenset(reserved_ids)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ContactFileError(source, line, None, f"not valid YAML: {exc.problem}") from exc
    except yaml.YAMLError as exc:
        raise ContactFileError(source, None, None, f"not valid YAML: {exc}") from exc
    if root is None:
        return []
    if not isinstance(root, yaml.SequenceNode):
        raise ContactFileError(source, _line(root), None, "expected a list of contacts")
    contacts: list[Contact] = []
    first_line: dict[str, int] = {}
    for item in root.value:
        if not isinstance(item, yaml.MappingNode):
            raise ContactFileError(source, _line(item), None, "expected a contact (a mapping)")
        mapping = _Mapping(source, item)
        contact = _contact(source, mapping, scope)
        if contact.id in first_line:
            raise mapping.error(
                source, f"duplicate id (first at line {first_line[contact.id]})", ("id",)
            )
        if contact.id in reserved:
            raise mapping.error(source, "this id belongs to a national contact", ("id",))
        first_line[contact.id] = _line(item)
        contacts.append(contact)
    return contacts


def read_contacts_file(
    path: Path, *, scope: Scope = "local", reserved_ids: Iterable[str] = ()
) -> list[Contact]:
    """Read and validate a whole contacts file (see ``parse_contacts``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContactFileError(str(path), None, None, f"cannot read the file: {exc}") from exc
    return parse_contacts(text, str(path), scope=scope, reserved_ids=reserved_ids)


def dump_contacts(contacts: Iterable[Contact]) -> str:
    """A contacts document that ``parse_contacts`` reads back into equal contacts."""
    records = [contact.record() for contact in contacts]
    if not records:
        return "[]\n"
    return yaml.safe_dump(records, allow_unicode=True, sort_keys=False, width=100)
