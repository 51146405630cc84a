"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``), parsed exactly.

Mirrors ``k8s.io/apimachinery/pkg/api/resource``: decimal and binary SI
suffixes, exponents, and the same rounding the scheduler uses (``MilliValue``
and ``Value`` round up).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from ..errors import QuantityError

# The API server's own pattern and message for a malformed quantity.
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")


def parse_quantity(value: object) -> Fraction:
    """Return the exact value of a quantity given as a string or a number."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
        return Fraction(str(value))
    return _parse_text(str(value).strip())


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    # Manifests repeat a handful of quantities ("8", "64Gi", "250m") thousands of times.
    m = _QUANTITY_RE.match(text)
    if not m or not _NUMBER_RE.match(m.group(1)):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number, suffix = Fraction(m.group(1)), m.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exp = re.fullmatch(r"[eE]([-+]?\d+)", suffix)
    if exp:
        return number * Fraction(10) ** int(exp.group(1))
    raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")


def milli_value(q: Fraction) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up."""
    return math.ceil(q * 1000)


def value(q: Fraction) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    return math.ceil(q)


def format_quantity(resource: str, amount: int) -> str:
    """Human form of an internal amount (cpu in milli, memory in bytes)."""
    if resource == "cpu":
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % size == 0:
                return f"{amount // size}{suffix}"
        return str(amount)
    return str(amount)
