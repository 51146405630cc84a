"""``parse_kueue``: the Kueue objects of a scenario, admitted as the API server and Kueue would.

The same YAML a user applies to a cluster running Kueue v0.17.0: ``kueue.x-k8s.io/v1beta2``
(the storage version) or ``v1beta1`` (still served, converted by Kueue's conversion
webhook), a manager ``Configuration`` (``config.kueue.x-k8s.io``) and ``v1`` Namespaces
(whose labels ClusterQueues' ``namespaceSelector`` reads). Other documents are skipped, so
a whole scenario can be passed. The first object that would be refused raises its
refusal, every error of that object at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...errors import GpuLabError
from ..documents import load_documents
from .clusterqueue import parse_cluster_queue
from .configuration import parse_configuration
from .localqueue import parse_local_queue, parse_priority_class
from .objects import KueueConfig
from .resourceflavor import parse_resource_flavor

GROUP = "kueue.x-k8s.io"
CONFIG_GROUP = "config.kueue.x-k8s.io"
SERVED = ("v1beta1", "v1beta2")  # config/components/crd/bases: v1beta2 is the storage version
RESOURCES = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
             "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}
# kinds Kueue serves that the model does not: refused by name rather than ignored
NOT_MODELLED = ("Cohort", "AdmissionCheck", "Topology", "Workload", "MultiKueueCluster", "MultiKueueConfig",
                "ProvisioningRequestConfig")


def parse_kueue(docs: Any) -> KueueConfig:
    """Admit the Kueue objects among ``docs`` (YAML text, a path, a dict or a list of dicts)."""
    if not isinstance(docs, (list, tuple)) or not all(isinstance(d, dict) for d in docs):
        docs = load_documents(docs)
    cfg = KueueConfig()
    for doc in _documents(docs):
        api, kind = str(doc.get("apiVersion") or ""), str(doc.get("kind") or "")
        group, _, version = api.rpartition("/")
        if api == "v1" and kind == "Namespace":
            meta = doc.get("metadata") or {}
            if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                cfg.namespace_labels[meta["name"]] = {str(k): str(x) for k, x in (meta.get("labels") or {}).items()}
        elif group == CONFIG_GROUP and kind == "Configuration":
            if version not in SERVED:
                raise GpuLabError(f'no kind "Configuration" is registered for version "{api}"')
            cfg.wait_for_pods_ready = parse_configuration(doc, version)
        elif group == GROUP:
            _admit(cfg, doc, kind, version, api)
    return cfg


def _documents(docs: Iterable[Any]) -> Iterable[dict]:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from _documents(doc["items"])
        elif isinstance(doc, dict):
            yield doc


def _admit(cfg: KueueConfig, doc: dict, kind: str, version: str, api: str) -> None:
    if kind in NOT_MODELLED and version in SERVED:
        raise GpuLabError(f"{kind}: the sim's Kueue model does not cover {kind} objects (cohorts are the "
                          "ClusterQueues' spec.cohortName; no hierarchy, admission checks or topology)")
    if kind not in RESOURCES or version not in SERVED:
        raise GpuLabError(f'no matches for kind "{kind}" in version "{api}"')
    if kind == "ResourceFlavor":
        obj: Any = parse_resource_flavor(doc)
        table: dict = cfg.resource_flavors
        key = obj.name
    elif kind == "ClusterQueue":
        obj, table = parse_cluster_queue(doc, version), cfg.cluster_queues
        key = obj.name
    elif kind == "LocalQueue":
        obj, table = parse_local_queue(doc), cfg.local_queues
        key = obj.key
    else:
        obj, table = parse_priority_class(doc), cfg.priority_classes
        key = obj.name
    if key in table:
        raise GpuLabError(f'{RESOURCES[kind]}.{GROUP} "{obj.name}" already exists')
    table[key] = obj
