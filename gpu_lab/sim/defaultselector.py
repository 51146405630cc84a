"""``helper.DefaultSelector`` (pkg/scheduler/framework/plugins/helper/spread.go) over the sim's objects.

PodTopologySpread's system default constraints count the pods that match this selector:
the labels of every Service in the pod's namespace whose selector matches the pod
(merged; a Service without a selector matches nothing), plus the requirements of the
pod's controller's selector when that controller is a ReplicaSet or a StatefulSet
(apps/v1; a ReplicationController would count too, gpu-lab has none). A Job, a DaemonSet
or no controller adds nothing; an empty result means no default spreading.

``Listers`` is what the scheduler's informers hold of those objects. Its ``version``
changes with every object added, so what a plugin derives from it can be kept until then.
"""

from __future__ import annotations

from typing import Any

from ..model.objects import Pod
from ..model.selectors import LabelSelector, Requirement

#: (apiVersion, kind) of the controllers whose selector DefaultSelector adds
SELECTOR_OWNERS = {("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"), ("v1", "ReplicationController")}


class Listers:
    def __init__(self) -> None:
        self.services: dict[str, dict[str, dict[str, str] | None]] = {}  # ns -> name -> selector
        self.selectors: dict[tuple[str, str, str], tuple[Requirement, ...]] = {}  # (kind, ns, name)
        self.version = 0

    def add_service(self, service: dict[str, Any]) -> None:
        self.services.setdefault(service["namespace"], {})[service["name"]] = service["selector"]
        self.version += 1

    def add_workload(self, record: dict[str, Any]) -> None:
        """A ReplicaSet (a Deployment's, by its hash-qualified selector) or a StatefulSet."""
        kind = record["kind"]
        if kind in ("Deployment", "ReplicaSet"):
            kind, name = "ReplicaSet", record["owner"]["name"]
        elif kind == "StatefulSet":
            name = record["name"]
        else:
            return
        parsed = LabelSelector.parse(record.get("selector") or {})
        self.selectors[(kind, record["namespace"], name)] = parsed.requirements
        self.version += 1

    def default_selector(self, pod: Pod) -> LabelSelector:
        merged: dict[str, str] = {}
        for selector in self.services.get(pod.namespace, {}).values():
            if selector is not None and all(pod.labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        requirements = [Requirement(k, "In", (v,)) for k, v in sorted(merged.items())]
        owner = _controller_of(pod)
        if owner is not None and (owner.get("apiVersion"), owner.get("kind")) in SELECTOR_OWNERS:
            requirements += self.selectors.get((owner["kind"], pod.namespace, owner.get("name", "")), ())
        return LabelSelector(tuple(requirements))


def _controller_of(pod: Pod) -> dict | None:
    """``metav1.GetControllerOfNoCopy``: the owner reference with ``controller: true``."""
    refs = (pod.raw.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), None)
