"""A ResourceFlavor manifest into a ``ResourceFlavor``: schema, CEL rules, webhook.

Schema and CEL rules from config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml
(v0.17.0); webhook checks from pkg/webhooks/resourceflavor_webhook.go
``ValidateResourceFlavor``. ``spec.topologyName`` (Topology Aware Scheduling) is accepted
and not modelled.
"""

from __future__ import annotations

from .. import validation as v
from ..objects import Taint, Toleration
from .objects import ResourceFlavor
from .validation import NAME_PATTERN, check, deny, label_name, listing, mapping, opened, require

WEBHOOK = "vresourceflavor.kb.io"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
EFFECTS_MESSAGE = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"


def parse_resource_flavor(doc: dict) -> ResourceFlavor:
    meta = metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {}
    name, s = opened(meta, namespaced=False)
    spec = mapping(s, doc.get("spec"), "spec")
    labels = mapping(s, spec.get("nodeLabels"), "spec.nodeLabels")
    if len(labels) > 8:
        s.errors.append(f"spec.nodeLabels: Too many: {len(labels)}: must have at most 8 items")
        s.blocking = True
    taints = listing(s, spec.get("nodeTaints"), "spec.nodeTaints")
    s.items("spec.nodeTaints", taints, max_items=8)
    for i, t in enumerate(taints):
        t = mapping(s, t, f"spec.nodeTaints[{i}]")
        require(s, t, f"spec.nodeTaints[{i}]", "effect", "key")
    if taints:
        s.rule("spec.nodeTaints", all(isinstance(t, dict) and t.get("effect") in EFFECTS for t in taints),
               EFFECTS_MESSAGE, "array")
    tols = [t for t in listing(s, spec.get("tolerations"), "spec.tolerations")]
    s.items("spec.tolerations", tols, max_items=8)
    tols = [t if isinstance(t, dict) else {} for t in tols]
    if tols:
        s.rule("spec.tolerations", all("key" in t or t.get("operator") == "Exists" for t in tols),
               "operator must be Exists when 'key' is empty, which means 'match all values and all keys'", "array")
        s.rule("spec.tolerations", all("tolerationSeconds" not in t or t.get("effect") == "NoExecute" for t in tols),
               "effect must be 'NoExecute' when 'tolerationSeconds' is set", "array")
        s.rule("spec.tolerations", all("operator" not in t or t["operator"] in ("Equal", "Exists") for t in tols),
               "supported toleration values: 'Equal'(default), 'Exists'", "array")
        s.rule("spec.tolerations", all(t.get("operator") != "Exists" or "value" not in t for t in tols),
               "a value must be empty when 'operator' is 'Exists'", "array")
        s.rule("spec.tolerations", all("effect" not in t or t["effect"] in EFFECTS for t in tols), EFFECTS_MESSAGE,
               "array")
    s.pattern("spec.topologyName", spec.get("topologyName"), NAME_PATTERN, 253)
    check("ResourceFlavor", name, s.result())
    deny(WEBHOOK, _webhook(labels, taints, tols))
    return ResourceFlavor(
        name=name,
        node_labels={str(k): str(x) for k, x in labels.items()},
        node_taints=tuple(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])) for t in taints),
        tolerations=tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                                     str(t.get("value") or ""), str(t.get("effect") or ""),
                                     t.get("tolerationSeconds")) for t in tols),
        raw_tolerations=tuple(dict(t) for t in tols),
    )


def _webhook(labels: dict, taints: list, tols: list) -> list[str]:
    errs = v.validate_labels(labels, "spec.nodeLabels")
    seen: dict[str, set[str]] = {}
    for i, t in enumerate(taints):
        at = f"spec.nodeTaints[{i}]"
        errs += label_name(t.get("key", ""), f"{at}.key")
        value = str(t.get("value") or "")
        problems = v.is_label_value(value)
        if problems:
            errs.append(v.invalid(f"{at}.value", value, ";".join(problems)))
        keys = seen.setdefault(str(t.get("effect")), set())
        if t.get("key") in keys:
            shown = v.go_struct(t, ("key", "value", "effect", "timeAdded"), omitempty=("value", "timeAdded"))
            errs.append(v.duplicate(at, shown, "taints must be unique by key and effect pair"))
            continue
        keys.add(t.get("key"))
    for i, t in enumerate(tols):
        if t.get("key"):
            errs += label_name(t["key"], f"spec.tolerations[{i}].key")
    return errs
