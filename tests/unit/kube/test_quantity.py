"""The quantity parser reads what Kubernetes reads, with Kubernetes' values, and rejects what it rejects."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arc_scaleset.kube.quantity import (
    MAX_DECIMAL_EXPONENT,
    InvalidQuantity,
    Quantity,
    QuantityFormat,
    parse_quantity,
)
from tests.unit.kube.quantity_vectors import VECTORS

# Inputs apimachinery's ParseQuantity accepts and we reject on purpose (see the module docstring): numbers
# without a digit, which it reads as zero, and exponents it misreads through int32 truncation or cannot
# evaluate in bounded time.
DELIBERATE_REJECTIONS = frozenset(
    {"+", "-", ".", "-.", "+.", "k", "m", "-m", "E", "Ki", "Mi", "+Gi", ".Ki", "e5", "-e5", ".e5"}
    | {"1e4294967296", "0e4294967296", "1e9223372036854775807", f"1e{MAX_DECIMAL_EXPONENT + 1}"}
)

# apimachinery 0.37 writes decimal-SI values of 10^21 and more without their exponent ("1000E" -> "1"), a
# bug later releases fixed by falling back to exponent notation, which we follow.
CANONICAL_BUG_037 = frozenset({"1000E"})

ACCEPTED = [(text, kube) for text, kube, _ in VECTORS if kube is not None and text not in DELIBERATE_REJECTIONS]
REJECTED = [text for text, kube, _ in VECTORS if kube is None]


def _exact(decimal_text: str) -> Fraction:
    return Fraction(Decimal(decimal_text))


@pytest.mark.parametrize(("text", "kube"), ACCEPTED, ids=repr)
def test_parses_every_accepted_vector_to_the_value_kubernetes_gives_it(text: str, kube: tuple[str, str, str]) -> None:
    value, canonical, fmt = kube
    quantity = parse_quantity(text)
    assert quantity.value == _exact(value)
    assert quantity.format is QuantityFormat(fmt)
    if text not in CANONICAL_BUG_037:
        assert quantity.canonical() == canonical


@pytest.mark.parametrize("text", REJECTED, ids=repr)
def test_rejects_every_vector_kubernetes_rejects(text: str) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(text)


@pytest.mark.parametrize("text", sorted(DELIBERATE_REJECTIONS), ids=repr)
def test_rejects_digitless_numbers_and_unreadable_exponents_that_parsequantity_lets_through(text: str) -> None:
    assert any(vector[0] == text and vector[1] is not None for vector in VECTORS), "not a real divergence"
    with pytest.raises(InvalidQuantity):
        parse_quantity(text)


def test_official_python_client_accepts_strings_kubernetes_rejects_and_we_follow_kubernetes() -> None:
    lenient = {text for text, kube, client in VECTORS if kube is None and client is not None}
    assert {" 1", "1 ", "1_000", "NaN", "Infinity", "1e3k", "1K", "1.5 "} <= lenient
    for text in lenient:
        with pytest.raises(InvalidQuantity):
            parse_quantity(text)


def test_official_python_client_disagrees_on_values_where_kubernetes_rounds_or_caps() -> None:
    # The client neither rounds to nanos nor caps binary values; Kubernetes does both, and so do we.
    disagreements = {
        text
        for text, kube, client in VECTORS
        if kube is not None and client is not None and Decimal(kube[0]) != Decimal(client)  # exact, and fast on 1E+huge
    }
    assert {"9Ei", "0.9n", "1.5e-10"} <= disagreements
    assert parse_quantity("9Ei").value == 2**63 - 1
    assert parse_quantity("0.9n").value == Fraction(1, 10**9)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.", 1),
        (".5", Fraction(1, 2)),
        ("1.G", 10**9),
        ("1E", 10**18),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("+1e+3", 1000),
        ("00010", 10),
        ("-0", 0),
    ],
)
def test_accepts_the_documented_edges_of_the_grammar(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "1 Gi", "0x10", "1\n", "\t1", "1e", "1e+", "1.1.1", "--1", "1e1.5", "\uff11", "\u0661", "1ki"],
)
def test_rejects_malformed_text_with_a_message_naming_it(text: str) -> None:
    with pytest.raises(InvalidQuantity) as caught:
        parse_quantity(text)
    assert repr(text) in str(caught.value)


def test_error_message_points_at_an_unknown_suffix() -> None:
    with pytest.raises(InvalidQuantity, match=r"unknown suffix 'Gb'"):
        parse_quantity("1Gb")


def test_error_message_points_at_whitespace() -> None:
    with pytest.raises(InvalidQuantity, match="whitespace"):
        parse_quantity(" 1Gi")


def test_reads_json_numbers_as_the_api_server_reads_them() -> None:
    assert parse_quantity(2) == parse_quantity("2")
    assert parse_quantity(0.5) == parse_quantity("500m")
    assert parse_quantity(1e21).value == 10**21
    assert parse_quantity(-3) == parse_quantity("-3")


@pytest.mark.parametrize("raw", [True, False, float("nan"), float("inf"), float("-inf")], ids=repr)
def test_rejects_booleans_and_non_finite_numbers(raw: bool | float) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(raw)


def test_rejects_other_types() -> None:
    with pytest.raises(InvalidQuantity, match="expected a string or a number"):
        parse_quantity([1])  # type: ignore[arg-type]


def test_sub_nano_values_with_enormous_negative_exponents_round_to_one_nano() -> None:
    # ParseQuantity never returns on some of these; we answer at once, with the value it rounds towards.
    assert parse_quantity("1e-2000000000").value == Fraction(1, 10**9)
    assert parse_quantity("-7e-2147483648").value == Fraction(-1, 10**9)


def test_compares_and_hashes_by_value_only() -> None:
    assert parse_quantity("1000m") == parse_quantity("1")
    assert parse_quantity("1Gi") == parse_quantity("1073741824")
    assert parse_quantity("1Gi") != parse_quantity("1G")
    assert hash(parse_quantity("0.5")) == hash(parse_quantity("500m"))
    assert len({parse_quantity("1k"), parse_quantity("1000"), parse_quantity("1e3")}) == 1
    assert parse_quantity("1") != "1"


def test_orders_by_value_across_suffix_families() -> None:
    texts = ["1Gi", "1G", "999Mi", "100m", "-1", "0", "1e9", "1.5Gi"]
    ordered = sorted(parse_quantity(text) for text in texts)  # stable: 1G stays before the equal 1e9
    assert [q.text for q in ordered] == ["-1", "0", "100m", "1G", "1e9", "999Mi", "1Gi", "1.5Gi"]
    assert parse_quantity("100m") < parse_quantity("1") <= parse_quantity("1000m") < parse_quantity("1Ki")
    assert parse_quantity("2") > parse_quantity("1.999999999") >= parse_quantity("1999999999n")


def test_quantity_repr_and_str() -> None:
    quantity = parse_quantity("1.5Gi")
    assert str(quantity) == "1536Mi"
    assert repr(quantity) == "Quantity('1.5Gi')"
    assert isinstance(quantity, Quantity)


# --- properties -----------------------------------------------------------------------------------------

_DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

signs = st.sampled_from(["", "+", "-"])
digit_strings = st.text(alphabet="0123456789", min_size=1, max_size=12)


@st.composite
def numbers(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A <number> of the grammar in every shape it allows, with its exact value."""
    shape = draw(st.sampled_from(["int", "int.frac", "int.", ".frac"]))
    whole = draw(digit_strings) if shape != ".frac" else ""
    frac = draw(digit_strings) if shape in ("int.frac", ".frac") else ""
    text = {"int": whole, "int.frac": f"{whole}.{frac}", "int.": f"{whole}.", ".frac": f".{frac}"}[shape]
    value = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    return text, value


def _kubernetes_rounding(value: Fraction) -> Fraction:
    """Away from zero to whole nanos: what the parser must do to any exact value."""
    scaled = value * 10**9
    if scaled.denominator == 1:
        return value
    whole = -(-abs(scaled.numerator) // scaled.denominator)
    return Fraction(whole if value > 0 else -whole, 10**9)


@given(signs, numbers(), st.sampled_from(sorted(_DECIMAL_POWERS)))
def test_every_decimal_si_form_parses_to_its_exact_value_rounded_up_to_nanos(
    sign: str, number: tuple[str, Fraction], suffix: str
) -> None:
    text, value = number
    expected = _kubernetes_rounding((-value if sign == "-" else value) * Fraction(10) ** _DECIMAL_POWERS[suffix])
    assert parse_quantity(f"{sign}{text}{suffix}").value == expected


@given(signs, numbers(), st.sampled_from(sorted(_BINARY_POWERS)))
def test_every_binary_si_form_parses_to_its_exact_value_capped_at_int64(
    sign: str, number: tuple[str, Fraction], suffix: str
) -> None:
    text, value = number
    exact = _kubernetes_rounding((-value if sign == "-" else value) * 2 ** _BINARY_POWERS[suffix])
    cap = 2**63 - 1
    assert parse_quantity(f"{sign}{text}{suffix}").value == max(-cap, min(cap, exact))


@given(signs, numbers(), st.sampled_from(["e", "E"]), signs, st.integers(min_value=0, max_value=40))
def test_every_exponent_form_parses_to_its_exact_value(
    sign: str, number: tuple[str, Fraction], e: str, exponent_sign: str, exponent: int
) -> None:
    text, value = number
    power = -exponent if exponent_sign == "-" else exponent
    expected = _kubernetes_rounding((-value if sign == "-" else value) * Fraction(10) ** power)
    assert parse_quantity(f"{sign}{text}{e}{exponent_sign}{exponent}").value == expected


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_whole_numbers_equal_the_same_amount_in_milli_and_with_an_exponent(n: int) -> None:
    assert parse_quantity(f"{n}") == parse_quantity(f"{n * 1000}m") == parse_quantity(f"{n}e0") == parse_quantity(n)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_BINARY_POWERS)))
def test_binary_suffixes_are_powers_of_1024(n: int, suffix: str) -> None:
    power = _BINARY_POWERS[suffix]
    assert parse_quantity(f"{n}{suffix}") == parse_quantity(str(min(n * 2**power, 2**63 - 1)))


@given(signs, numbers(), st.sampled_from(sorted(_DECIMAL_POWERS) + sorted(_BINARY_POWERS) + ["e7", "E-4"]))
def test_canonical_form_parses_back_to_the_same_value(sign: str, number: tuple[str, Fraction], suffix: str) -> None:
    quantity = parse_quantity(f"{sign}{number[0]}{suffix}")
    again = parse_quantity(quantity.canonical())
    assert again == quantity
    assert again.canonical() == quantity.canonical()


@given(
    signs,
    numbers(),
    st.sampled_from(sorted(_DECIMAL_POWERS) + sorted(_BINARY_POWERS)),
    st.sampled_from([" ", "\t", "\n", "\u00a0"]),
    st.sampled_from(["before", "after", "between"]),
)
def test_whitespace_anywhere_is_rejected(
    sign: str, number: tuple[str, Fraction], suffix: str, space: str, where: str
) -> None:
    body = f"{sign}{number[0]}"
    text = {"before": space + body + suffix, "after": body + suffix + space, "between": body + space + suffix}[where]
    if where == "between" and suffix == "":
        text = body + space
    with pytest.raises(InvalidQuantity):
        parse_quantity(text)


@given(signs, numbers(), st.sampled_from([*"ABCDFHIJLNOQRSVWXYZabcdfghjloqrstvwxyz%_/", "ki", "KB", "Mb", "i"]))
def test_unknown_suffixes_are_rejected(sign: str, number: tuple[str, Fraction], suffix: str) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(f"{sign}{number[0]}{suffix}")


@given(numbers(), st.sampled_from(["\uff11", "\u0661", "\u00b2", "\u2167"]))
def test_non_ascii_digits_are_rejected(number: tuple[str, Fraction], foreign_digit: str) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(number[0] + foreign_digit)
