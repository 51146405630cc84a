"""Kueue's integer view of quantities and how it prints them in messages.

Kueue keeps every quota and request as an int64 (pkg/resources/requests.go
``ResourceValue``): millicores for ``cpu``, whole units (rounded up) for the rest,
which is what gpu-lab's scheduler uses too (``model.parse.internal_amount``). Its
messages print a number back with ``ResourceQuantityString``: a ``resource.Quantity``
built as ``NewMilliQuantity(v, DecimalSI)`` for cpu, ``newCanonicalQuantity(v,
BinarySI)`` for memory, ephemeral-storage and hugepages, ``NewQuantity(v, DecimalSI)``
otherwise, then ``String()``.
"""

from __future__ import annotations

from typing import Any

from ..parse import internal_amount

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def resource_value(resource: str, raw: Any) -> int:
    """``resources.ResourceValue``: millicores for cpu, ``Value()`` for everything else."""
    return internal_amount(resource, raw)


def _decimal(mantissa: int, exponent: int) -> str:
    """A DecimalSI quantity's canonical text: the largest power-of-1000 suffix with an integer."""
    if mantissa == 0:
        return "0"
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa, exponent = mantissa // 1000, exponent + 3
    suffix = _DECIMAL_SUFFIX.get(exponent)
    return f"{mantissa}{suffix}" if suffix is not None else f"{mantissa}e{exponent}"


def _binary(value: int) -> str:
    # CanonicalizeBytes: a BinarySI value under 1024 prints as DecimalSI; one that is not a
    # whole number of Ki prints without suffix and newCanonicalQuantity re-reads it as DecimalSI.
    if abs(value) < 1024 or value % 1024:
        return _decimal(value, 0)
    k = 0
    while value % 1024 == 0 and k < len(_BINARY_SUFFIX) - 1:
        value, k = value // 1024, k + 1
    return f"{value}{_BINARY_SUFFIX[k]}"


def quantity_string(resource: str, value: int) -> str:
    """``resources.ResourceQuantityString(name, v)``."""
    if resource == "cpu":
        return _decimal(value, -3)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return _binary(value)
    return _decimal(value, 0)
