"""The sim's kubectl against the real kubectl v1.37 on the local lab: one scenario on both,
the same commands, the same text once what cannot match is masked.

Compared: the header lines (same columns, same order), one row per object in the same order
(the API server's: by namespace, then name), and every cell but the masked ones: STATUS
(Pending, Running), READY, NODE, NOMINATED NODE, roles, versions, taints, labels,
capacity, allocatable, the pods' requests, limits and percentages, Allocated resources,
the Events' types, reasons, objects and messages (the scheduler's own words).

Masked, and why:
- ages and dates (AGE, LAST SEEN, describe's timestamps): the sim's clock is not the wall clock;
- pod IPs (the sim assigns none: ``<none>``) and node InternalIPs (the local node agent
  numbers its nodes in its own order);
- describe's Boot ID (a real node agent's changes at each start);
- the ``beta.kubernetes.io/{arch,os}`` labels and the ``node.alpha.kubernetes.io/ttl``
  annotation: the real kubelet and TTL controller add them; the sim's nodes carry the labels
  gpu-lab gives a node, not the deprecated ones;
- the RegisteredNode Events and describe's Events section: the node lifecycle controller
  records them; the sim runs no node controller.
"""

from __future__ import annotations

import re

import pytest
from fleets import H100_POOL
from realcluster import shared_lab

import gpu_lab

pytestmark = pytest.mark.controlplane

#: names of their own: the shared lab keeps earlier modules' Events in default (for an hour)
PODS = ["kx-huge", "kx-infer", "kx-notol", "kx-train"]
SCENARIO = H100_POOL + """
---
apiVersion: v1
kind: Pod
metadata: {name: kx-train}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-0}
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: x, resources: {requests: {cpu: "8", memory: 64Gi}, limits: {cpu: "16", nvidia.com/gpu: 2}}}
---
apiVersion: v1
kind: Pod
metadata: {name: kx-infer}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-1}
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: a, image: x, resources: {requests: {cpu: 500m, memory: 8Gi}, limits: {memory: 8Gi, nvidia.com/gpu: 1}}}
  - {name: b, image: x}
---
apiVersion: v1
kind: Pod
metadata: {name: kx-huge}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 9}}}
---
apiVersion: v1
kind: Pod
metadata: {name: kx-notol}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
"""

HEADERS = ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
           "READINESS GATES", "ROLES", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
           "KERNEL-VERSION", "CONTAINER-RUNTIME", "GPU.PRODUCT", "LAST SEEN", "TYPE", "REASON", "OBJECT",
           "MESSAGE"]
MASKED_CELLS = {"AGE", "LAST SEEN", "IP", "INTERNAL-IP"}
DATE = re.compile(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000")


@pytest.fixture(scope="module")
def labs(request):
    for local in shared_lab(request, "the kubectl differential test"):
        sim = gpu_lab.connect("sim", deterministic=True)
        for lab in (sim, local):
            lab.apply(SCENARIO)
            lab.schedule()
        yield sim, local


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """(the header's columns, each row's cells), cut where the header's columns start, with
    the masked columns' cells replaced."""
    header, *rows = text.splitlines()
    names, starts, at = [], [], 0
    while at < len(header):
        name = next(h for h in sorted(HEADERS, key=len, reverse=True) if header.startswith(h, at))
        names.append(name)
        starts.append(at)
        at += len(name)
        while at < len(header) and header[at] == " ":
            at += 1
    cells = []
    for row in rows:
        bounds = [*starts[1:], None]
        cut = [row[s:e].strip() for s, e in zip(starts, bounds)]
        cells.append(["<masked>" if n in MASKED_CELLS else c for n, c in zip(names, cut)])
    return names, cells


def both(labs, command: str) -> tuple[str, str]:
    sim, local = labs
    out_sim, out_local = sim.kubectl(command), local.kubectl(command)
    assert out_local.returncode == 0, out_local.text
    assert out_sim.returncode == 0
    return out_sim.text, out_local.text


@pytest.mark.parametrize("command", ["get pods", "get pods -o wide", "get pods -A", "get nodes",
                                     "get nodes -o wide", "get nodes -L nvidia.com/gpu.product"])
def test_get_prints_the_same_table(labs, command):
    ours, theirs = (table(t) for t in both(labs, command))
    if "pods" in command:  # only the scenario's pods (the shared lab's default has no others)
        theirs = (theirs[0], [r for r in theirs[1] if r[theirs[0].index("NAME")] in PODS])
    assert ours == theirs
    if command == "get pods -o wide":
        rows = {r[0]: r[1:4] + r[6:] for r in ours[1]}
        assert rows["kx-train"] == ["1/1", "Running", "0", "h100-0", "<none>", "<none>"]
        assert rows["kx-infer"] == ["2/2", "Running", "0", "h100-1", "<none>", "<none>"]
        assert rows["kx-huge"][:4] == ["0/1", "Pending", "0", "<none>"]


def test_get_events_prints_the_same_events(labs):
    ours, theirs = (table(t) for t in both(labs, "get events"))
    # the shared lab's default namespace keeps earlier modules' Events, and the node lifecycle
    # controller's RegisteredNode: only the scenario's pods' Events are compared (partition: an
    # earlier module's Event whose message spans lines leaves rows with no kind/name object)
    theirs = (theirs[0], [r for r in theirs[1] if r[3].partition("/")[2] in PODS])
    assert ours == theirs
    assert [r[2:4] for r in ours[1]] == [["FailedScheduling", "pod/kx-huge"], ["Scheduled", "pod/kx-infer"],
                                         ["FailedScheduling", "pod/kx-notol"], ["Scheduled", "pod/kx-train"]]


def sections(text: str) -> dict[str, list[str]]:
    """describe's top-level sections ("Labels", "Capacity", ...) and their lines, masked."""
    text = DATE.sub("<date>", text)
    text = re.sub(r"(Boot ID: +)\S+", r"\1<masked>", text)
    text = re.sub(r"(InternalIP: +)\S+", r"\1<masked>", text)
    text = re.sub(r"(?m)^(  default +kx-\S+ .*\)  +)\S+$", r"\1<age>", text)  # the pods' Age
    out: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines():
        if line and not line[0].isspace():
            title = line.split(":", 1)[0]
            out[title] = [line]
        else:
            out[title].append(line)
    # the real kubelet's deprecated labels: not the sim's; label lines after the title line
    labels = [line.split(None, 1)[-1] if i == 0 else line.strip() for i, line in enumerate(out["Labels"])]
    out["Labels"] = [lab for lab in labels if not lab.startswith("beta.kubernetes.io/")]
    for masked in ("Annotations", "Events"):  # the TTL controller's annotation; RegisteredNode
        out[masked] = ["<masked>"]
    return out


@pytest.mark.parametrize("node", ["h100-0", "h100-1"])
def test_describe_node_prints_the_same_sections(labs, node):
    ours, theirs = (sections(t) for t in both(labs, f"describe node {node}"))
    assert list(ours) == list(theirs)  # the same sections in the same order
    for title in ours:
        assert ours[title] == theirs[title], title
    pods = "\n".join(ours["Non-terminated Pods"])
    assert ("kx-train" in pods) == (node == "h100-0") and ("kx-infer" in pods) == (node == "h100-1")
