"""The manager's ``Configuration`` (``config.kueue.x-k8s.io``): the part the model reads.

Only ``waitForPodsReady`` changes admission; the rest of a Configuration (integrations,
webhook, metrics ...) is accepted and ignored. v0.17 decodes both versions
(cmd/kueue/main.go adds both to its scheme):

* ``v1beta2``: the section's presence turns the feature on (pkg/util/waitforpodsready
  ``Enabled``); ``timeout`` has no default and is required (pkg/config/validation.go
  ``validateWaitForPodsReady``); ``blockAdmission`` defaults to false
  (apis/config/v1beta2/defaults.go).
* ``v1beta1``: ``enable: true`` turns it on, ``timeout`` defaults to 5m and
  ``blockAdmission`` to true (apis/config/v1beta1 defaults.go, configuration_conversion.go).

Bad values fail the way the manager fails at start: ``Unable to load the configuration``
with the validation errors (pkg/config/config.go ``Load``).
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import GpuLabError
from .. import validation as v
from ..duration import go_duration_string
from .objects import CREATION_TIMESTAMP, EVICTION_TIMESTAMP, WaitForPodsReady
from .validation import IS_NEGATIVE

FIELDS = ("enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout")
STRATEGY_FIELDS = ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)?")


def parse_go_duration(text: Any) -> float:
    """``time.ParseDuration`` (what ``metav1.Duration`` decodes with), in seconds."""
    if not isinstance(text, str):
        raise GpuLabError("json: cannot unmarshal number into Go value of type string")
    s, sign = text, 1.0
    if s[:1] in "+-" and s:
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise GpuLabError(f'time: invalid duration "{text}"')
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            raise GpuLabError(f'time: invalid duration "{text}"')
        if m.group(2) is None:
            raise GpuLabError(f'time: missing unit in duration "{text}"')
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def parse_configuration(doc: dict, version: str) -> WaitForPodsReady | None:
    raw = doc.get("waitForPodsReady")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        _fail(["waitForPodsReady: must be an object"])
    _strict(raw, FIELDS if version == "v1beta1" else FIELDS[1:], "waitForPodsReady")
    strategy = raw.get("requeuingStrategy") or {}
    if not isinstance(strategy, dict):
        _fail(["waitForPodsReady.requeuingStrategy: must be an object"])
    _strict(strategy, STRATEGY_FIELDS, "waitForPodsReady.requeuingStrategy")
    if version == "v1beta1":
        if raw.get("enable") is not True:
            return None
        timeout = _duration(raw.get("timeout", "5m"))
        block = raw.get("blockAdmission", True)
    else:
        timeout = _duration(raw.get("timeout", "0s"))
        block = raw.get("blockAdmission", False)
    recovery = _duration(raw["recoveryTimeout"]) if raw.get("recoveryTimeout") is not None else timeout
    errs = []
    if timeout == 0:
        errs.append(v.required("waitForPodsReady.timeout", "must be specified"))
    if timeout < 0:
        errs.append(v.invalid("waitForPodsReady.timeout", go_duration_string(timeout), IS_NEGATIVE))
    if recovery < 0:
        errs.append(v.invalid("waitForPodsReady.recoveryTimeout", go_duration_string(recovery), IS_NEGATIVE))
    at = "waitForPodsReady.requeuingStrategy"
    stamp = strategy.get("timestamp", EVICTION_TIMESTAMP)
    if stamp not in (CREATION_TIMESTAMP, EVICTION_TIMESTAMP):
        errs.append(v.not_supported(f"{at}.timestamp", stamp, (CREATION_TIMESTAMP, EVICTION_TIMESTAMP)))
    numbers = {}
    for key, default in (("backoffLimitCount", None), ("backoffBaseSeconds", 60), ("backoffMaxSeconds", 3600)):
        value = strategy.get(key)
        if value is None:  # absent or null: a nil pointer, which Kueue's defaulting fills in
            value = default
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            _fail([f"{at}.{key}: json: cannot unmarshal {type(value).__name__} into Go value of type int32"])
        if value is not None and value < 0:
            errs.append(v.invalid(f"{at}.{key}", value, IS_NEGATIVE))
        numbers[key] = value
    if not isinstance(block, bool):
        _fail(["waitForPodsReady.blockAdmission: json: cannot unmarshal into Go value of type bool"])
    if errs:
        _fail(errs)
    base, most = numbers["backoffBaseSeconds"], numbers["backoffMaxSeconds"]
    assert base is not None and most is not None  # defaulted above
    return WaitForPodsReady(
        timeout=timeout,
        block_admission=block,
        recovery_timeout=recovery or None,  # "0s" turns the recovery check off
        requeuing_timestamp=stamp,
        backoff_limit_count=numbers["backoffLimitCount"],
        backoff_base_seconds=base,
        backoff_max_seconds=most,  # 0: no cap (pkg/util/wait NewBackoff)
    )


def _duration(raw: Any) -> float:
    try:
        return parse_go_duration(raw)
    except GpuLabError as e:
        _fail([str(e)])
        raise  # unreachable: _fail raises


def _strict(raw: dict, known: tuple[str, ...], path: str) -> None:
    # the manager decodes its file with serializer.EnableStrict (pkg/config/config.go fromFile)
    unknown = [k for k in raw if k not in known]
    if unknown:
        _fail([f'strict decoding error: unknown field "{path}.{unknown[0]}"'])


def _fail(errors: list[str]) -> None:
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    raise GpuLabError(f"Unable to load the configuration: {detail}")
