"""Kubernetes ``resource.Quantity``: a strict parser and exact, value-based comparison.

Grammar (apimachinery's ``Quantity`` doc comment; also the OpenAPI ``pattern`` the API server enforces for
quantity fields of custom resources, such as the pod templates inside our CRDs)::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | ("+" | "-") <number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalSI> | <decimalExponent>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= ("e" | "E") [+-] <digits>

Digits are ASCII only; no whitespace anywhere (``" 1"``, ``"1 "``, ``"1 Gi"`` are invalid); ``1.``, ``.5``,
``1.G``, ``+1``, ``0010`` and ``1E`` (one exa) are valid. A string is accepted exactly when both the
grammar above and apimachinery's ``ParseQuantity`` accept it, and its value is the one ``ParseQuantity``
gives it (``tests/unit/kube/quantity_vectors.py`` pins both against the real parser):

- a non-zero value finer than one nano is rounded *away from zero* to a whole number of nanos
  (``0.1n`` → ``1n``, ``1.5e-9`` → ``2n``), so every value is a whole number of nanos;
- a binary-SI value is capped at 2^63-1 in magnitude (``9Ei`` → 9223372036854775807); decimal values are
  not capped.

Where we knowingly differ from ``ParseQuantity`` (each case is malformed input no real object carries):

- a number with no digit at all (``"+"``, ``"."``, ``"k"``, ``"-.Mi"``) is rejected; ``ParseQuantity``
  reads most of these as zero, but the documented grammar and the CRD schema pattern reject them;
- a decimal exponent outside the int32 range is rejected (``ParseQuantity`` silently truncates it to
  int32, reading ``1e4294967296`` as ``1``), and so is a value of 10^(``MAX_DECIMAL_EXPONENT`` + 1) or
  more in magnitude (``ParseQuantity`` spends unbounded time and memory on ``1e2147483647``; it also never
  returns on ``1e-2147483648``, which we read as ``1n``).

The official Python client's ``kubernetes.utils.quantity.parse_quantity`` is *more lenient* (it hands the
number to ``decimal.Decimal``, so it accepts whitespace, ``1_000``, ``NaN``, ``Infinity``, ``1e3k`` and
``1K``) and it neither rounds to nanos nor caps binary values; we do not use it.

Values are :class:`fractions.Fraction`: no floating point anywhere.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from fractions import Fraction
from typing import Final

__all__ = [
    "MAX_DECIMAL_EXPONENT",
    "InvalidQuantity",
    "Quantity",
    "QuantityFormat",
    "parse_quantity",
]

#: Values must stay below 10^(this + 1) in magnitude. ``ParseQuantity`` has no bound but its time grows
#: without limit with the exponent; 10^4096 is far beyond any real resource amount.
MAX_DECIMAL_EXPONENT: Final = 4096

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_BINARY_CAP: Final = Fraction(2**63 - 1)
_NANO: Final = 10**9


class QuantityFormat(enum.Enum):
    """How a quantity is written back: the family of the suffix it was parsed with."""

    DECIMAL_SI = "DecimalSI"  # 12M, 1500m, 7
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


class InvalidQuantity(ValueError):  # noqa: N818 - the name the rest of the code base uses
    """The input is not a Kubernetes quantity. The message names the input and what is wrong with it."""


# (base, power, format) per fixed suffix.
_SUFFIXES: Final[dict[str, tuple[int, int, QuantityFormat]]] = {
    "": (10, 0, QuantityFormat.DECIMAL_SI),
    "n": (10, -9, QuantityFormat.DECIMAL_SI),
    "u": (10, -6, QuantityFormat.DECIMAL_SI),
    "m": (10, -3, QuantityFormat.DECIMAL_SI),
    "k": (10, 3, QuantityFormat.DECIMAL_SI),
    "M": (10, 6, QuantityFormat.DECIMAL_SI),
    "G": (10, 9, QuantityFormat.DECIMAL_SI),
    "T": (10, 12, QuantityFormat.DECIMAL_SI),
    "P": (10, 15, QuantityFormat.DECIMAL_SI),
    "E": (10, 18, QuantityFormat.DECIMAL_SI),
    "Ki": (2, 10, QuantityFormat.BINARY_SI),
    "Mi": (2, 20, QuantityFormat.BINARY_SI),
    "Gi": (2, 30, QuantityFormat.BINARY_SI),
    "Ti": (2, 40, QuantityFormat.BINARY_SI),
    "Pi": (2, 50, QuantityFormat.BINARY_SI),
    "Ei": (2, 60, QuantityFormat.BINARY_SI),
}

# One pass over the whole string (fullmatch: ``$`` would also match before a trailing newline).
# [0-9] and not \d: \d matches every Unicode digit, and Kubernetes accepts ASCII only.
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?:(?P<whole>[0-9]+)(?:\.(?P<frac1>[0-9]*))?|\.(?P<frac2>[0-9]+))"
    r"(?:(?P<fixed>[KMGTPE]i|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?"
)

# What the scanner in ParseQuantity would still take for a quantity; used only to word the error.
_LOOKS_NUMERIC_RE: Final = re.compile(r"[+-]?[0-9.]*")


class Quantity:
    """An exact quantity: equality, hashing and ordering are by :attr:`value` only.

    ``Quantity("1")``-style construction is not offered: build one with :func:`parse_quantity`.
    ``1000m == 1``, ``1Gi == 1073741824``, ``0.5 == 500m``; the format and the original text do not take
    part in comparisons.
    """

    __slots__ = ("_format", "_text", "_value")

    _value: Fraction
    _format: QuantityFormat
    _text: str

    def __init__(self, value: Fraction, *, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI, text: str = "") -> None:
        self._value = value
        self._format = fmt
        self._text = text

    @property
    def value(self) -> Fraction:
        """The exact value (always a whole number of nanos for a parsed quantity)."""
        return self._value

    @property
    def format(self) -> QuantityFormat:
        """The suffix family of the input, which Kubernetes keeps when it writes the value back."""
        return self._format

    @property
    def text(self) -> str:
        """The string this quantity was parsed from."""
        return self._text

    def is_zero(self) -> bool:
        return self._value == 0

    def canonical(self) -> str:
        """The string Kubernetes writes for this value (``1.5`` → ``1500m``, ``1.5Gi`` → ``1536Mi``).

        The largest suffix that keeps the number whole, in the quantity's own format; binary values below
        1024 in magnitude or with a fractional part are written in decimal SI. Unlike apimachinery 0.37,
        whose decimal-SI output silently drops exponents above 18 (``1000E`` → ``1``), a decimal-SI value
        of 10²¹ or more is written with an exponent (``1e21``), as later apimachinery releases do.
        """
        return _canonical(self._value, self._format)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self._text or self.canonical()!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __lt__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._value < other._value
        return NotImplemented

    def __le__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._value <= other._value
        return NotImplemented

    def __gt__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._value > other._value
        return NotImplemented

    def __ge__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._value >= other._value
        return NotImplemented


def parse_quantity(raw: str | int | float) -> Quantity:
    """Parse a quantity as it appears in decoded JSON: a string, or a JSON number.

    Numbers are read the way the API server reads an unquoted JSON number: an ``int`` exactly, a
    ``float`` through its shortest round-trip text (``0.5`` → ``"0.5"``, ``1e21`` → ``"1e+21"``).
    Raises :class:`InvalidQuantity` for anything else, including ``bool``, NaN and infinities.
    """
    if isinstance(raw, str):
        return _parse_text(raw)
    if isinstance(raw, bool):  # bool is an int subclass; a JSON true is never a quantity
        raise InvalidQuantity(f"invalid quantity {raw!r}: a boolean is not a quantity")
    if isinstance(raw, int):
        return _parse_text(str(raw))
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise InvalidQuantity(f"invalid quantity {raw!r}: not a finite number")
        return _parse_text(repr(raw))
    raise InvalidQuantity(f"invalid quantity {raw!r}: expected a string or a number, got {type(raw).__name__}")


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    # Cached: reconciles compare the same handful of resource strings over and over, and a Quantity is
    # immutable, so sharing instances is safe. Errors are not cached (lru_cache does not cache raises).
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise InvalidQuantity(_explain(text))
    negative = match["sign"] == "-"
    whole = match["whole"] or ""
    frac = match["frac1"] if match["frac1"] is not None else (match["frac2"] or "")

    fixed = match["fixed"]
    if fixed is not None:
        base, power, fmt = _SUFFIXES[fixed]
    elif match["exp"] is not None:
        base, power, fmt = 10, int(match["exp"]), QuantityFormat.DECIMAL_EXPONENT
        if not _INT32_MIN <= power <= _INT32_MAX:
            raise InvalidQuantity(
                f"invalid quantity {text!r}: exponent {power} is outside the int32 range Kubernetes reads"
            )
    else:
        base, power, fmt = _SUFFIXES[""]

    digits = int(whole + frac) if (whole or frac) else 0
    if digits == 0:
        return Quantity(Fraction(0), fmt=fmt, text=text)
    if negative:
        digits = -digits

    if base == 2:
        value = Fraction(digits * 2**power, 10 ** len(frac))
    else:
        exponent = power - len(frac)
        # Bound the work before building a big number: |digits| < 10**len(str), so the magnitude is
        # below 10**(ndigits + exponent).
        ndigits = len(str(abs(digits)))
        if ndigits + exponent > MAX_DECIMAL_EXPONENT + 1:
            raise InvalidQuantity(
                f"invalid quantity {text!r}: a magnitude of 10^{MAX_DECIMAL_EXPONENT + 1} or more is not supported"
            )
        if ndigits + exponent <= -9:
            # Below one nano in magnitude: ParseQuantity rounds any such non-zero value to exactly ±1n.
            # Shortcut it, so that 1e-2000000000 costs nothing.
            return Quantity(Fraction(1 if digits > 0 else -1, _NANO), fmt=fmt, text=text)
        value = Fraction(digits * 10**exponent) if exponent >= 0 else Fraction(digits, 10**-exponent)

    value = _round_up_to_nano(value)
    if fmt is QuantityFormat.BINARY_SI:
        if abs(value) > _BINARY_CAP:
            value = _BINARY_CAP if value > 0 else -_BINARY_CAP
        if 0 < abs(value) < 1:
            fmt = QuantityFormat.DECIMAL_SI  # as ParseQuantity does: "0.5Ki" is written "512"
    return Quantity(value, fmt=fmt, text=text)


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a whole number of nanos (ParseQuantity's inf.RoundUp at scale 9)."""
    scaled = value * _NANO
    if scaled.denominator == 1:
        return value
    magnitude = -((-abs(scaled.numerator)) // scaled.denominator)  # ceil(|scaled|)
    return Fraction(magnitude if value > 0 else -magnitude, _NANO)


def _explain(text: str) -> str:
    """Say what is wrong with ``text`` in words a user can act on."""
    if text == "":
        return "invalid quantity '': empty string"
    if text != text.strip():
        return f"invalid quantity {text!r}: leading or trailing whitespace"
    prefix = _LOOKS_NUMERIC_RE.match(text)
    number = prefix.group(0) if prefix else ""
    if not any(ch in "0123456789" for ch in number):
        return f"invalid quantity {text!r}: expected a number such as 1, 0.5 or 250m"
    if number.count(".") > 1 or number.count("+") + number.count("-") > 1:
        return f"invalid quantity {text!r}: malformed number {number!r}"
    suffix = text[len(number) :]
    return (
        f"invalid quantity {text!r}: unknown suffix {suffix!r} "
        "(expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or an exponent such as e3 or E-3)"
    )


# --- canonical form ----------------------------------------------------------------------------------

_DECIMAL_SUFFIX_BY_POWER: Final = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX_BY_POWER: Final = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


def _canonical(value: Fraction, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt is QuantityFormat.BINARY_SI and magnitude >= 1024 and magnitude.denominator == 1:
        mantissa, power = magnitude.numerator, 0
        while power < 60 and mantissa % 1024 == 0:
            mantissa //= 1024
            power += 10
        return f"{sign}{mantissa}{_BINARY_SUFFIX_BY_POWER[power]}"
    # Decimal: mantissa * 10**exponent with exponent a multiple of 3, as large as keeps the mantissa whole.
    # A value written by apimachinery is never finer than nanos; smaller exponents are kept if ever given.
    exponent = 0
    while magnitude.denominator != 1:
        magnitude *= 1000
        exponent -= 3
    mantissa = magnitude.numerator
    while mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if fmt is QuantityFormat.DECIMAL_EXPONENT or exponent not in _DECIMAL_SUFFIX_BY_POWER:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX_BY_POWER[exponent]}"
