"""Lab 13: two fine-tunes slow on the right nodes. ``gpu_lab.labs.lab13``.

``paged_cluster()`` builds the ticket's cluster: two H100 nodes of 8 GPUs (GPUs 0-3 on NUMA
node 0, 4-7 on node 1, gpu-lab's model of an eight-GPU server), eight 2-GPU chat replicas
spread over them by the default scheduler, an overnight scale-down that ended the replicas
holding GPUs 2-3 and 6-7 on each node, and then two 4-GPU fine-tunes, which the scheduler
fits into the 2 + 2 free GPUs of each node: both span the sockets. ``check_diagnosis`` (which
pods span sockets) and ``check_fix`` (every pod on one socket, nothing lost, no node added)
compare the learner's answers with that state and say what is wrong.

Only the public ``Session`` calls are used, so the lab runs on ``"sim"`` and ``"local"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...gpus.labels import gpu_uuids
from ...gpus.topology import gpu_numa
from .feedback import Checklist, Feedback
from .tickets import Incidents, fresh_session

__all__ = ["CLUSTER", "HINTS", "chat_pod", "check_diagnosis", "check_fix", "finetune_pod",
           "paged_cluster", "sockets"]

HINTS = (
    "Start from the pods, not the nodes: `kubectl get pods -o wide` shows both nodes healthy and "
    "full. Which GPUs does each pod hold? `lab.pods()['devices']` lists their UUIDs; "
    "`gpu_lab.gpus.gpu_uuids(node, 8).index(uuid)` turns one into the GPU's index, as "
    "`nvidia-smi -L` on the node would.",
    "An eight-GPU server has two sockets: `gpu_lab.gpus.gpu_numa(8)` says which NUMA node each "
    "index hangs off (`nvidia-smi topo -m` on a real node). A pod spans sockets when its GPUs sit "
    "on both. The scheduler only counted free GPUs; the kubelet took the only four left.",
    "The fix is an order, not a setting: the fine-tunes need a whole socket each, and they only "
    "get one if they come before the chat replicas fill both sockets. `single-numa-node` would "
    "not help: the kubelet would refuse the fine-tunes (TopologyAffinityError) instead of "
    "slowing them. No node may be added and every pod must keep its size.",
    "The answer: spanning = the two fine-tunes. To fix, delete both fine-tunes and the chat "
    "replica on GPUs 4-5 of each node, apply lab13.finetune_pod(name) for each fine-tune, "
    "lab.schedule(), then lab13.chat_pod(name) for each deleted chat replica, lab.schedule(). "
    "Each fine-tune gets GPUs 4-7 (the device plugin keeps a request on one socket when one has "
    "room) and the chats refill 2-3.",
)

GPU = "nvidia.com/gpu"
CHATS = tuple(f"chat-{i}" for i in range(8))
FINETUNES = ("ft-a", "ft-b")
NODES = ("h100-0", "h100-1")

CLUSTER = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 2, gpu: {model: H100-80GB, count: 8}, cpu: "192", memory: 2048Gi}
"""


def _pod(name: str, app: str, gpus: int, image: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: {app}}}}}
spec:
  containers:
  - name: main
    image: {image}
    resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
"""


def chat_pod(name: str) -> str:
    """One chat replica (2 GPUs, tensor parallel), as the ticket's cluster runs them."""
    return _pod(name, "chat", 2, "vllm/vllm-openai:v0.6.3")


def finetune_pod(name: str) -> str:
    """One fine-tune (4 GPUs, data parallel), as the ticket's cluster runs them."""
    return _pod(name, "finetune", 4, "nvcr.io/nvidia/pytorch:24.08-py3")


@dataclass
class Incident:
    spanning: tuple[str, ...]  # pods whose GPUs sit on both sockets at the ticket
    running: dict[str, int]  # pod -> GPUs, for every pod running at the ticket
    apps: dict[str, int]  # app label -> pods running at the ticket


_INCIDENTS: Incidents[Incident] = Incidents("13", "paged_cluster")


def sockets(lab, pod: str) -> dict[int, list[int]]:
    """NUMA node -> the GPU indices ``pod`` holds there (empty when it holds none)."""
    row = lab.pods().set_index("name").loc[pod]
    node = row["node"] if isinstance(row["node"], str) else None
    devices = row["devices"] if isinstance(row["devices"], dict) else {}
    if not node:
        return {}
    uuids = gpu_uuids(node, 8)
    numa = gpu_numa(8)
    out: dict[int, list[int]] = {}
    for d in devices.get(GPU, []):
        g = uuids.index(d)
        out.setdefault(numa[g], []).append(g)
    return {n: sorted(gs) for n, gs in sorted(out.items())}


def paged_cluster(backend: str = "sim", **options: Any):
    """The cluster of the ticket: returns a ``Session`` with both fine-tunes running slow.

    ``options`` go to ``gpu_lab.connect`` (``deterministic=True`` unless given).
    """
    lab = fresh_session(backend, options)
    lab.apply(CLUSTER)
    for name in CHATS:  # one by one, as a Deployment's replicas come up
        lab.apply(chat_pod(name))
        lab.schedule()
    # the overnight scale-down: the replicas on GPUs 2-3 and 6-7 of each node ended
    for name in CHATS:
        held = [g for gs in sockets(lab, name).values() for g in gs]
        if held and held[0] in (2, 6):
            lab.delete(name)
    for name in FINETUNES:
        lab.apply(finetune_pod(name))
        lab.schedule()
    pods = lab.pods()
    running = {r["name"]: int(r["gpus"]) for _, r in pods.iterrows() if r["phase"] == "Running"}
    spanning = tuple(sorted(p for p in running if len(sockets(lab, p)) > 1))
    apps = {app: sum(1 for p in running if _app(p) == app) for app in ("chat", "finetune")}
    _INCIDENTS.remember(lab, Incident(spanning, running, apps))
    return lab


def _incident(lab) -> Incident:
    return _INCIDENTS.of(lab)


def _app(pod: str) -> str | None:
    """The workload a pod belongs to, by the names the ticket's manifests use."""
    if pod.startswith("chat-"):
        return "chat"
    return "finetune" if pod in FINETUNES else None


def _where(lab, pod: str) -> str:
    return " + ".join(f"GPUs {','.join(map(str, gs))} on NUMA node {n}"
                      for n, gs in sockets(lab, pod).items()) or "no GPUs"


def check_diagnosis(lab, spanning) -> Feedback:
    """``spanning``: the names of the pods whose GPUs sit on both sockets."""
    inc = _incident(lab)
    c = Checklist("Lab 13: diagnosis", look="kubectl exec <pod> -- printenv NVIDIA_VISIBLE_DEVICES")
    try:
        named = sorted({str(p) for p in spanning})
    except TypeError:
        c.require(False, f"spanning should be a list of pod names, not {spanning!r}")
        return c.done()
    unknown = [p for p in named if p not in inc.running]
    if unknown:
        c.require(False, f"no running pod is called {', '.join(unknown)}", look="kubectl get pods")
    extra = [p for p in named if p in inc.running and p not in inc.spanning]
    for p in extra:
        c.require(False, f"{p} holds {_where(lab, p)}: one socket, so it does not span them")
    missed = [p for p in inc.spanning if p not in named]
    if missed:
        c.require(False, f"{len(missed)} pod{'s' if len(missed) != 1 else ''} you did not name "
                         f"hold{'s' if len(missed) == 1 else ''} GPUs on both NUMA nodes of its node; "
                         "map each pod's device UUIDs to GPU indices, and the indices to sockets")
    if not unknown and not extra and not missed:
        c.require(True, "", "spanning sockets: " + "; ".join(f"{p} ({_where(lab, p)})" for p in inc.spanning))
    return c.done()


def check_fix(lab) -> Feedback:
    """Every pod on one socket, every workload still there with its size, nothing waiting, no node added."""
    inc = _incident(lab)
    c = Checklist("Lab 13: fix", look="kubectl get pods -o wide")
    pods = lab.pods()
    nodes = sorted(lab.nodes()["name"])
    c.require(nodes == list(NODES), f"the fleet is {', '.join(nodes)}; the ticket allows no new "
              f"node (it was {', '.join(NODES)})", f"still {len(NODES)} nodes")
    waiting = pods[pods["phase"] != "Running"]
    c.require(waiting.empty, "not running: " + ", ".join(f"{r['name']} ({r['phase']}"
                                                        + (f", {r['reason']}" if r.get("reason") else "") + ")"
                                                        for _, r in waiting.iterrows()),
              "every pod is running")
    running = pods[pods["phase"] == "Running"]
    counts = {app: 0 for app in inc.apps}
    sizes_ok = True
    for _, r in running.iterrows():
        app = _app(str(r["name"]))
        if app in counts:
            counts[app] += 1
            want = 2 if app == "chat" else 4
            if int(r["gpus"]) != want:
                sizes_ok = False
                c.require(False, f"{r['name']} asks for {int(r['gpus'])} GPUs; a {app} pod needs {want}")
    for app, n in inc.apps.items():
        c.require(counts[app] == n, f"{counts[app]} {app} pods run, the ticket had {n}: "
                  "nothing may be lost", f"{n} {app} pods run")
    if sizes_ok:
        c.require(True, "", "every pod kept its size")
    spans = [p for p in running["name"] if len(sockets(lab, p)) > 1]
    c.require(not spans, "still spanning sockets: " + "; ".join(f"{p} ({_where(lab, p)})" for p in spans),
              "no pod spans NUMA nodes: " + "; ".join(f"{p} on {_where(lab, p)}"
                                                      for p in running["name"] if _app(str(p)) == "finetune"))
    return c.done()
