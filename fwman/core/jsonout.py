"""The one encoder of fwman's ``--json`` payloads: a result value in, JSON-able data out.

:func:`encode` turns a value into what ``json.dumps`` writes: a dataclass field by field in declaration order
(:func:`fields_of`), or by its own ``to_json()`` where its type has one (a JSON form that is more than its
fields); a pydantic model by its own ``model_dump(mode="json")``; an enum as its value; a list or tuple as a
list; a dict value by value; None as null; anything else as it is (``json.dumps(default=str)`` writes it).

A field's metadata (:func:`meta`) carries the few exceptions: the JSON name when it differs from the attribute
(``key``), a field left out (``omit``), a function of the value (``via``, not called on None), and properties
written right after the field (``then``: values computed from the others, at their place in the document).
Standard library only: ``fwman scan --json`` imports it on its fast path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

#: the field metadata key that holds a field's :class:`Spec`
KEY = "fwman.json"


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one dataclass field is written (:func:`meta`)."""

    key: str | None = None
    omit: bool = False
    via: Callable[[Any], Any] | None = None
    then: tuple[str, ...] = ()


def meta(
    *, key: str | None = None, omit: bool = False, via: Callable[[Any], Any] | None = None, then: tuple[str, ...] = ()
) -> dict[str, Spec]:
    """Return field metadata for :func:`fields_of`: ``key`` the JSON name (default: the attribute's), ``omit``
    leaves the field out, ``via`` maps a value that is not None before it is encoded, ``then`` names attributes
    (properties) written right after the field, under their own names."""
    return {KEY: Spec(key, omit, via, then)}


#: a field that is no part of the JSON form
OMIT = meta(omit=True)


def fields_of(obj: Any) -> dict[str, Any]:
    """Return the dataclass instance ``obj`` as a JSON object: each field under its name, in declaration order,
    as its metadata (:func:`meta`) says, each value encoded (:func:`encode`). Raises TypeError when ``obj`` is
    not a dataclass instance."""
    doc: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        spec: Spec | None = f.metadata.get(KEY)
        value = getattr(obj, f.name)
        if spec is None:
            doc[f.name] = encode(value)
            continue
        if not spec.omit:
            doc[spec.key or f.name] = encode(value if spec.via is None or value is None else spec.via(value))
        for name in spec.then:
            doc[name] = encode(getattr(obj, name))
    return doc


def encode(value: Any) -> Any:
    """Return ``value`` as JSON-able data (the rules in the module docstring)."""
    if isinstance(value, Enum):  # before str and int: a StrEnum is both
        return value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_json", None)
        return own() if own is not None else fields_of(value)
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if hasattr(value, "model_dump"):  # pydantic, told by its method: importing pydantic costs start-up time
        return value.model_dump(mode="json")
    return value


__all__ = ["KEY", "OMIT", "Spec", "encode", "fields_of", "meta"]
