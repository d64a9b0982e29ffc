"""Reading a decoded JSON document as Go's ``encoding/json`` reads it into a struct, for the listener's
``config.json`` (:mod:`arc_scaleset.api.listener_config`, :mod:`arc_scaleset.api.listener_metrics`).

The rules: a missing key or ``null`` leaves the field's zero value (its default here); a value of another JSON
type is refused, never converted; an integral float reads as an integer. A decoder is a function from a decoded
JSON value to the field's value, raising :class:`Refused` for what it cannot read. Decoding does not stop at the
first refusal: :func:`decode_fields` tries every key, and an object or array decoder every entry, so a caller
can report every problem at once. Refusals name the path and the JSON type found, never the value: it may be a
credential.

Plain functions over the standard library: the listener imports this, and pydantic would cost it about 10 MB
(issue 20).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "Decoder",
    "Refusal",
    "Refused",
    "array_of",
    "decode_fields",
    "integer",
    "json_type",
    "number",
    "object_of",
    "string",
    "struct",
]

T = TypeVar("T")
Decoder = Callable[[object], T]
"""Reads one decoded JSON value into a field's value; raises :class:`Refused` for what it cannot read."""


def json_type(value: object) -> str:
    """The JSON type of a decoded value, as a problem sentence says it (``a string``, ``an array``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One value that could not be decoded: where (object keys and array indexes from the decoded value down),
    what JSON type was expected and which was found."""

    path: tuple[str, ...]
    expected: str
    found: str

    @property
    def dotted(self) -> str:
        """The path as the problem sentences write it: ``metrics.histograms.h.buckets.0``."""
        return ".".join(self.path)

    def sentence(self) -> str:
        return f"{self.dotted} must be {self.expected}, got {self.found}"


class Refused(Exception):  # noqa: N818 - reads as what happened to the value
    """What a decoder could not read: ``refusals``, with paths relative to the value it was given, and
    ``salvaged``, what it could read despite them (``None``: nothing; the field keeps its default).

    Carries no value, only paths and JSON types, so its text never shows a credential.
    """

    def __init__(self, refusals: Sequence[Refusal], *, salvaged: object = None) -> None:
        super().__init__("; ".join(refusal.sentence() for refusal in refusals))
        self.refusals = list(refusals)
        self.salvaged = salvaged

    @classmethod
    def wrong_type(cls, expected: str, value: object) -> Refused:
        """The value itself is of the wrong JSON type."""
        return cls([Refusal((), expected, json_type(value))])

    def under(self, key: str) -> list[Refusal]:
        """The refusals, their paths starting at ``key`` (the key or index this value was found under)."""
        return [Refusal((key, *refusal.path), refusal.expected, refusal.found) for refusal in self.refusals]


# --- scalars ------------------------------------------------------------------------------------------------


def string(value: object) -> str:
    if not isinstance(value, str):
        raise Refused.wrong_type("a string", value)
    return value


def integer(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise Refused.wrong_type("an integer", value)


def number(value: object) -> float:
    # A bool is an int in Python, but not a number in JSON.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise Refused.wrong_type("a number", value)


# --- composites ---------------------------------------------------------------------------------------------


def _decode_each(items: Sequence[tuple[str, object, Decoder[Any]]]) -> tuple[dict[str, Any], list[Refusal]]:
    """Each ``(key, value, decoder)`` decoded: what could be (salvaged parts included) and every refusal."""
    decoded: dict[str, Any] = {}
    refusals: list[Refusal] = []
    for key, value, decode in items:
        try:
            decoded[key] = decode(value)
        except Refused as exc:
            refusals.extend(exc.under(key))
            if exc.salvaged is not None:
                decoded[key] = exc.salvaged
    return decoded, refusals


def decode_fields(
    document: Mapping[str, object], decoders: Mapping[str, Decoder[Any]]
) -> tuple[dict[str, Any], list[Refusal]]:
    """The keys of ``decoders`` read from ``document``, in the decoders' order: the decoded values of those
    present and not ``null`` (the others keep their zero value), and every refusal, its path starting at the key.
    Other keys are ignored, as Go ignores unknown keys."""
    present = [(key, document[key], decode) for key, decode in decoders.items() if document.get(key) is not None]
    return _decode_each(present)


def array_of(element: Decoder[T], *, expected: str = "an array") -> Decoder[tuple[T, ...]]:
    """A JSON array of ``element``; one bad element refuses the whole array (nothing is salvaged)."""

    def decode(value: object) -> tuple[T, ...]:
        if not isinstance(value, list | tuple):
            raise Refused.wrong_type(expected, value)
        decoded, refusals = _decode_each([(str(index), item, element) for index, item in enumerate(value)])
        if refusals:
            raise Refused(refusals)
        return tuple(decoded.values())

    return decode


def object_of(entry: Decoder[T], *, expected: str = "an object") -> Decoder[dict[str, T]]:
    """A JSON object of ``entry`` values, keyed by name; the entries that decode are salvaged."""

    def decode(value: object) -> dict[str, T]:
        if not isinstance(value, Mapping):
            raise Refused.wrong_type(expected, value)
        decoded, refusals = _decode_each([(str(key), item, entry) for key, item in value.items()])
        if refusals:
            raise Refused(refusals, salvaged=decoded)
        return decoded

    return decode


def struct(cls: type[T], decoders: Mapping[str, Decoder[Any]], *, expected: str = "an object") -> Decoder[T]:
    """A JSON object read into ``cls`` (constructed with the decoded fields as keywords, every field having a
    default): an instance of ``cls`` is taken as it is, ``null`` is the zero value ``cls()`` (Go's decoding of
    a null map entry into a struct), and with refusals what decoded is salvaged."""

    def decode(value: object) -> T:
        if isinstance(value, cls):
            return value
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise Refused.wrong_type(expected, value)
        fields, refusals = decode_fields(value, decoders)
        decoded = cls(**fields)
        if refusals:
            raise Refused(refusals, salvaged=decoded)
        return decoded

    return decode
