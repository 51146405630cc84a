"""What a pod declares about its GPU use: ``gpulab.dev/gpu-utilization`` and ``gpulab.dev/gpu-memory``.

The simulator runs no kernels, so a pod says how busy it keeps each GPU it
holds and how much framebuffer it allocates on each; the exporter model and
the waste figures start from these two numbers. Either may be absent: then it
is unknown (NaN in tables, no series in the exporter text, as DCGM leaves a
blank field out), never guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidObject, QuantityError
from ..model.quantity import parse_quantity

UTILIZATION_ANNOTATION = "gpulab.dev/gpu-utilization"
MEMORY_ANNOTATION = "gpulab.dev/gpu-memory"
MIB = 2**20
_PERCENT = re.compile(r"^\d+(\.\d+)?$")


@dataclass(frozen=True)
class Declared:
    """A pod's declared use of each GPU device it holds."""

    utilization: float | None  # percent of time the device is busy, 0-100 (DCGM_FI_DEV_GPU_UTIL)
    memory_mib: float | None  # framebuffer allocated on the device, MiB (DCGM_FI_DEV_FB_USED)


def pod_name(namespace: str | None, pod: str) -> str:
    """How errors name a pod: bare in ``default``, ``namespace/name`` elsewhere."""
    return pod if namespace in (None, "", "default") else f"{namespace}/{pod}"


def _invalid(namespace: str | None, pod: str, key: str, raw: Any, why: str) -> InvalidObject:
    # The API server's field-error wording, so the line reads like any other rejected manifest.
    return InvalidObject("Pod", pod_name(namespace, pod),
                         [f'metadata.annotations[{key}]: Invalid value: "{raw}": {why}'])


def utilization(raw: Any, *, pod: str, namespace: str | None = "default") -> float:
    """``"35"`` -> 35.0; a plain number from 0 to 100 (no ``%``, no sign, no exponent)."""
    text = str(raw).strip()
    if isinstance(raw, bool) or not _PERCENT.match(text) or not 0 <= float(text) <= 100:
        raise _invalid(namespace, pod, UTILIZATION_ANNOTATION, raw, "must be a number from 0 to 100")
    return float(text)


def memory_mib(raw: Any, *, pod: str, namespace: str | None = "default") -> float:
    """A Kubernetes quantity (``12Gi``, ``500Mi``, ``16G``) in MiB."""
    try:
        value = parse_quantity(str(raw).strip() if not isinstance(raw, bool) else raw)
    except QuantityError as err:
        raise _invalid(namespace, pod, MEMORY_ANNOTATION, raw, str(err)) from None
    if value < 0:
        raise _invalid(namespace, pod, MEMORY_ANNOTATION, raw, "must be greater than or equal to 0")
    mib = float(value) / MIB
    if not math.isfinite(mib):
        raise _invalid(namespace, pod, MEMORY_ANNOTATION, raw, "must be a finite quantity")
    return mib


def declared(annotations: Mapping[str, Any] | None, *, pod: str,
             namespace: str | None = "default") -> Declared:
    """Read both annotations off a pod's ``metadata.annotations`` (absent = None)."""
    notes = annotations or {}
    util = notes.get(UTILIZATION_ANNOTATION)
    mem = notes.get(MEMORY_ANNOTATION)
    return Declared(None if util is None else utilization(util, pod=pod, namespace=namespace),
                    None if mem is None else memory_mib(mem, pod=pod, namespace=namespace))
