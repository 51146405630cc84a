"""What the API server and Kueue's webhooks refuse, in their words, every error at once.

A Kueue object goes through two gates, in this order (k8s.io/apiserver's registry
``Store.Create`` validates before it calls validating admission):

1. the CRD's OpenAPI schema and CEL rules (config/components/crd/bases/*.yaml, from the
   ``+kubebuilder`` markers in apis/kueue/v1beta2). Refusal: ``ClusterQueue.kueue.x-k8s.io
   "name" is invalid: ...``. The wording of each schema error is apiextensions-apiserver's
   (pkg/apiserver/validation ``kubeOpenAPIResultToFieldErrors``, kube-openapi's
   ``patternFail`` "%s in %s should match '%s'"); a CEL rule's is ``Invalid value:
   "object": <message>``; an enum, required or too-many error skips the CEL rules and says
   so (registry/customresource/strategy.go ``hasBlockingErr``).
2. Kueue's validating webhooks (pkg/webhooks/clusterqueue_webhook.go
   ``ValidateClusterQueue``, resourceflavor_webhook.go ``ValidateResourceFlavor``).
   Refusal: ``admission webhook "vclusterqueue.kb.io" denied the request: ...``
   (webhook names from config/components/webhook/manifests.yaml).

LocalQueues and WorkloadPriorityClasses have no webhook: a LocalQueue naming a missing
ClusterQueue is accepted and shows it in its status (see ``Kueue.local_queue_status``).
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import GpuLabError, InvalidObject, QuantityError
from .. import validation as v
from ..validation.quantities import parse as parse_quantity
from ..validation.quantities import quantity_string

GROUP = "kueue.x-k8s.io"
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# k8s.io/apimachinery/pkg/api/validation IsNegativeErrorMsg
IS_NEGATIVE = "must be greater than or equal to 0"
NOT_CHECKED = ("<nil>: Invalid value: null: some validation rules were not checked because the object "
               "was invalid; correct the existing errors to complete validation")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class Schema:
    """Errors of one object against its CRD schema; ``blocking`` ones stop the CEL rules."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.blocking = False
        self._rules: list[tuple[str, bool, str, str]] = []

    def required(self, path: str) -> None:
        self.errors.append(v.required(path))
        self.blocking = True

    def enum(self, path: str, value: Any, values: tuple[str, ...]) -> None:
        if value is not None and value not in values:
            self.errors.append(v.not_supported(path, value, values))
            self.blocking = True

    def wrong_type(self, path: str, value: Any, expected: str) -> bool:
        """A JSON type the schema does not allow; True when ``value`` had the wrong type."""
        kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
                dict: "object"}.get(type(value), "null")
        allowed = expected.split(",")
        if kind in allowed or (kind == "integer" and "number" in allowed):
            return False
        self.errors.append(v.invalid(path, kind, f'{path} in body must be of type {expected}: "{kind}"'))
        self.blocking = True
        return True

    def pattern(self, path: str, value: Any, pattern: str, max_length: int | None = None) -> None:
        if not isinstance(value, str):
            return
        if max_length is not None and len(value) > max_length:
            self.errors.append(f"{path}: Too long: may not be more than {max_length} bytes")
            self.blocking = True
        if not re.search(pattern, value):
            self.errors.append(v.invalid(path, value, f"{path} in body should match '{pattern}'"))

    def quantity(self, path: str, value: Any) -> None:
        """An ``x-kubernetes-int-or-string`` quantity with Kueue's quantity pattern."""
        if isinstance(value, float) and value.is_integer():
            return
        if not self.wrong_type(path, value, "integer,string"):
            self.pattern(path, value, QUANTITY_PATTERN)

    def items(self, path: str, value: list, min_items: int | None = None, max_items: int | None = None) -> None:
        if min_items is not None and len(value) < min_items:
            self.errors.append(v.invalid(path, len(value), f"{path} in body should have at least {min_items} items"))
        if max_items is not None and len(value) > max_items:
            self.errors.append(f"{path}: Too many: {len(value)}: must have at most {max_items} items")
            self.blocking = True

    def rule(self, path: str, ok: bool, message: str, kind: str = "object") -> None:
        """A CEL rule (``x-kubernetes-validations``), checked once the schema passes; its error
        shows the schema type of the field it is on (``object``, ``array``)."""
        self._rules.append((path, ok, message, kind))

    def result(self) -> list[str]:
        if self.blocking:
            return [*self.errors, NOT_CHECKED] if self._rules else list(self.errors)
        return self.errors + [v.invalid(p, kind, m) for p, ok, m, kind in self._rules if not ok]


def opened(meta: dict, namespaced: bool) -> tuple[str, Schema]:
    """An object's name and its schema, opened with the metadata checks the API server runs
    first (a missing name or namespace stops the schema checks after it)."""
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    s = Schema()
    meta_errs = v.validate_object_meta(meta, namespaced=namespaced)
    s.errors += meta_errs
    s.blocking = any(": Required value" in e for e in meta_errs)
    return name, s


def check(kind: str, name: str, errors: list[str]) -> None:
    """The API server's refusal of an object its CRD schema rejects."""
    if errors:
        raise InvalidObject(f"{kind}.{GROUP}", name, v.dedupe(errors))


def deny(webhook: str, errors: list[str]) -> None:
    """A validating webhook's refusal, as the API server reports it."""
    if errors:
        errors = v.dedupe(errors)
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise GpuLabError(f'admission webhook "{webhook}" denied the request: {detail}')


def mapping(s: Schema, raw: Any, path: str) -> dict:
    if raw is None:
        return {}
    if s.wrong_type(path, raw, "object"):
        return {}
    return raw


def listing(s: Schema, raw: Any, path: str) -> list:
    if raw is None:
        return []
    if s.wrong_type(path, raw, "array"):
        return []
    return raw


def require(s: Schema, obj: dict, at: str, *keys: str) -> None:
    """``at.key: Required value`` for each of ``keys`` that ``obj`` lacks."""
    for key in keys:
        if key not in obj:
            s.required(f"{at}.{key}")


def bounded_listing(s: Schema, obj: dict, key: str, at: str, min_items: int, max_items: int) -> list:
    """``obj[key]`` as a list (a wrong type said), its length checked when it is given."""
    out = listing(s, obj.get(key), f"{at}.{key}")
    if key in obj:
        s.items(f"{at}.{key}", out, min_items, max_items)
    return out


def quantity_value(raw: Any) -> Any:
    """The quantity a webhook decodes, or None when it does not parse."""
    try:
        return parse_quantity(raw)
    except (QuantityError, ValueError):
        return None


def negative(raw: Any, path: str) -> list[str]:
    """``validateResourceQuantity``: the Quantity's ``String()`` and IsNegativeErrorMsg."""
    q = quantity_value(raw)
    return [v.invalid(path, quantity_string(raw), IS_NEGATIVE)] if q is not None and q < 0 else []


def label_name(key: Any, path: str) -> list[str]:
    """``metav1validation.ValidateLabelName``."""
    return [v.invalid(path, key, m) for m in v.is_qualified_name(str(key))]

