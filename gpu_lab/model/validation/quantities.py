"""Quantities as the API server reads and prints them (``resource.Quantity``)."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from ..quantity import parse_quantity

_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL_EXP.items()}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_PARTS = re.compile(r"([+-]?)0*(\d*)(?:\.(\d*))?(.*)")


def quantity_text(raw: Any) -> str:
    """The text the API server would see for a YAML scalar (JSON numbers print bare)."""
    if raw is None:
        return "0"  # a JSON null quantity decodes to zero
    if isinstance(raw, float) and raw.is_integer() and abs(raw) < 1e21:
        return str(int(raw))
    return str(raw).strip()


def parse(raw: Any) -> Fraction:
    """The exact value; raises ``QuantityError`` with the API server's message."""
    if raw is None:
        return Fraction(0)
    if isinstance(raw, bool):
        return parse_quantity(raw)
    return parse_quantity(quantity_text(raw))


def quantity_string(raw: Any) -> str:
    """``resource.Quantity.String()``: how the API server prints a quantity in errors.

    The canonical form keeps the input's flavour (decimal SI, binary SI or
    exponent) with the largest suffix that keeps an integer mantissa, so
    ``0.5`` prints as ``500m`` and ``1024Mi`` as ``1Gi``. Inputs already in
    canonical form are printed as written (``ParseQuantity``'s fast path).
    """
    text = quantity_text(raw)
    value = parse(raw)
    if value == 0:
        return "0"
    m = _PARTS.fullmatch(text)
    assert m is not None  # parse() above accepted the text
    num, denom, suffix = (m.group(2) or "0"), (m.group(3) or ""), m.group(4)
    binary = suffix in _BINARY_EXP
    exponent_form = not binary and suffix not in _DECIMAL_EXP
    shifted = num + denom
    if binary:
        exp2 = _BINARY_EXP[suffix]
        if (not denom and 15 - len(num) - exp2 * 3 // 10 - 1 >= 0 and int(num) & 7
                and int(num) << exp2 < 2**63):
            return text
    else:
        exp10 = int(suffix[1:]) if exponent_form else _DECIMAL_EXP[suffix]
        scale = exp10 - len(denom)
        if (len(shifted) <= 18 and scale >= -9 and scale % 3 == 0
                and not shifted.endswith("000") and shifted[0] != "0"):
            return text
    # Values below a nano round up, away from zero, as ParseQuantity does.
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    nanos = math.ceil(magnitude * 10**9)
    if binary and magnitude >= 1024 and (nanos % 10**9 == 0):
        n, k = nanos // 10**9, 0
        while n % 1024 == 0 and k < 6:
            n, k = n // 1024, k + 1
        return f"{sign}{n}{_BINARY_SUFFIX[k]}"
    mantissa, exp = nanos, -9
    while mantissa % 10 == 0:
        mantissa, exp = mantissa // 10, exp + 1
    mantissa, exp = mantissa * 10 ** (exp % 3), exp - exp % 3
    if exponent_form:
        return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")
    if exp in _DECIMAL_SUFFIX:
        return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exp]}"
    return f"{sign}{mantissa}e{exp}"
