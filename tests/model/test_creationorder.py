"""The order a batch is created in (every backend): what makes no pods first, then the pod
makers by priority, file order among equals."""

from gpu_lab.model import creationorder
from gpu_lab.model.scenario import parse_scenario


def _pod(name, pc=None):
    spec = {"containers": [{"name": "c", "image": "x"}]}
    if pc:
        spec["priorityClassName"] = pc
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _deployment(name, replicas, pc=None):
    template = _pod("t", pc)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}}}


def test_higher_priority_first_then_file_order():
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 100}
    docs = [_pod("zeta"), _deployment("web", 2), _pod("alpha"), high, _deployment("urgent", 1, "high"),
            _pod("vip", "high")]
    sc = parse_scenario(docs)
    order = [d["metadata"]["name"] for d in creationorder.creation_order(docs, sc.pods)]
    assert order == ["high", "urgent", "vip", "zeta", "web", "alpha"]
    assert len(creationorder.pods_of(docs[1], sc.pods)) == 2 and len(creationorder.pods_of(docs[0], sc.pods)) == 1
