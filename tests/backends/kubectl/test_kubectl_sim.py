"""``Session.kubectl`` on the sim: kubectl's tables and describe, rendered from the session."""

from __future__ import annotations

import re

import pytest
from fleets import H100_POOL

import gpu_lab
from gpu_lab.backends.kubectl import KubectlOutput
from gpu_lab.backends.kubectl.duration import human_duration
from gpu_lab.backends.kubectl.tabwriter import DESCRIBE, GET, tabulate

PODS = """
---
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: x, resources: {requests: {cpu: "8", memory: 64Gi}, limits: {cpu: "16", nvidia.com/gpu: 2}}}
---
apiVersion: v1
kind: Pod
metadata: {name: infer, annotations: {gpulab.dev/duration: 60s}}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-0}
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, image: x}
---
apiVersion: v1
kind: Pod
metadata: {name: notol}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
"""


@pytest.fixture
def lab():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(H100_POOL + PODS)
    lab.schedule()
    return lab


@pytest.mark.parametrize("seconds, text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5, "5s"), (119, "119s"), (120, "2m"), (182, "3m2s"),
    (599, "9m59s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 300, "3h5m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (51 * 3600, "2d3h"), (72 * 3600, "3d"), (8 * 86400, "8d"),
    (729 * 86400, "729d"), (730 * 86400, "2y"), (740 * 86400, "2y10d"), (3000 * 86400, "8y"),
])
def test_ages_are_kubectls_human_durations(seconds, text):
    assert human_duration(seconds) == text


def test_the_tabwriter_pads_columns_as_go_does():
    assert tabulate("A\tBB\tC\nxxxx\ty\tz", *GET) == "A      BB    C\nxxxx   y     z"
    # describe: padding 2, no minimum; an empty cell is a column too; a line without a tab
    # ends the block, so the next lines get widths of their own
    text = "Name:\tx\nLonger title:\ty\nBreak:\n  k\t\tv\n  kk\t\tw"
    assert tabulate(text, *DESCRIBE) == ("Name:          x\nLonger title:  y\nBreak:\n"
                                         "  k     v\n  kk    w")


def test_get_pods_has_kubectls_columns_one_row_per_pod_by_name(lab):
    out = lab.kubectl("get pods")
    assert isinstance(out, KubectlOutput) and out.returncode == 0
    assert out.lines == [
        "NAME    READY   STATUS    RESTARTS   AGE",
        "infer   2/2     Running   0          0s",
        "notol   0/1     Pending   0          0s",
        "train   1/1     Running   0          0s",
    ]
    lab.advance(182)  # infer ran its 60 s: Completed, its containers no longer ready
    assert lab.kubectl("get pods").lines[1:] == [
        "infer   0/2     Completed   0          3m2s",
        "notol   0/1     Pending     0          3m2s",
        "train   1/1     Running     0          3m2s",
    ]


def test_get_pods_wide_adds_ip_node_nominated_node_and_readiness_gates(lab):
    lines = lab.kubectl("get pods -o wide").lines
    assert lines[0] == ("NAME    READY   STATUS    RESTARTS   AGE   IP       NODE     NOMINATED NODE"
                        "   READINESS GATES")
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["train"][5:] == ["<none>", "h100-0", "<none>", "<none>"]
    assert rows["notol"][5:] == ["<none>", "<none>", "<none>", "<none>"]
    assert lab.kubectl("get po -owide").text == lab.kubectl("kubectl get pods --output=wide").text


def test_get_pods_namespaces(lab):
    lines = lab.kubectl("get pods -A").lines
    assert lines[0] == "NAMESPACE   NAME    READY   STATUS    RESTARTS   AGE"
    assert [line.split()[:2] for line in lines[1:]] == [["default", n] for n in ("infer", "notol", "train")]
    assert lab.kubectl("get pods -n kube-system").text == "No resources found in kube-system namespace."
    assert lab.kubectl("get pods --namespace=default").text == lab.kubectl("get pods").text


def test_get_nodes_columns_status_and_label_columns(lab):
    lab.advance(3 * 3600 + 300)
    lab.cordon("h100-1")
    assert lab.kubectl("get nodes").lines == [
        "NAME     STATUS                     ROLES    AGE    VERSION",
        "h100-0   Ready                      <none>   3h5m   v1.37.2",
        "h100-1   Ready,SchedulingDisabled   <none>   3h5m   v1.37.2",
    ]
    lines = lab.kubectl("get nodes -L nvidia.com/gpu.product -L no.such/label").lines
    assert lines[0].endswith("VERSION   GPU.PRODUCT             LABEL")
    assert lines[1].endswith("v1.37.2   NVIDIA-H100-80GB-HBM3   ")  # a missing label: an empty cell
    wide = lab.kubectl("get nodes -o wide").lines
    assert re.split(r"\s{2,}", wide[0])[-5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION",
                                         "CONTAINER-RUNTIME"]
    assert "gpu-lab simulated node   6.8.0-gpu-lab (amd64)   gpu-lab://fake" in wide[1]


SECTIONS = ["Name:", "Roles:", "Labels:", "Annotations:", "CreationTimestamp:", "Taints:", "Unschedulable:",
            "Lease:", "Conditions:", "Addresses:", "Capacity:", "Allocatable:", "System Info:",
            "Non-terminated Pods:", "Allocated resources:", "Events:"]


def test_describe_node_has_kubectls_sections_in_order(lab):
    lab.advance(30)
    text = lab.kubectl("describe node h100-0").text
    titles = [line.split()[0] if not line.startswith(("Non-terminated", "Allocated", "System"))
              else " ".join(line.split()[:2]) for line in text.splitlines() if line and line[0] != " "]
    assert [t for t in titles if t.endswith(":")] == SECTIONS
    assert "Taints:             nvidia.com/gpu=present:NoSchedule" in text
    assert re.search(r"^CreationTimestamp:  \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000$", text, re.M)
    assert "  Ready            True    " in text
    assert "  nvidia.com/gpu:     8" in text
    assert "Non-terminated Pods:          (2 in total)" in text
    # kubectl's pod table: an empty column after Name; percentages of allocatable, truncated
    assert re.search(r"^  default +infer +0 \(0%\) +0 \(0%\) +0 \(0%\) +0 \(0%\) +30s$", text, re.M)
    assert re.search(r"^  default +train +8 \(8%\) +16 \(16%\) +64Gi \(6%\) +0 \(0%\) +30s$", text, re.M)
    allocated = text.split("Allocated resources:\n")[1].splitlines()
    assert allocated[:6] == [
        "  (Total limits may be over 100 percent, i.e., overcommitted.)",
        "  Resource           Requests   Limits",
        "  --------           --------   ------",
        "  cpu                8 (8%)     16 (16%)",
        "  memory             64Gi (6%)  0 (0%)",
        "  ephemeral-storage  0 (0%)     0 (0%)",
    ]
    assert allocated[6] == "  nvidia.com/gpu     3          3"
    assert allocated[7] == "Events:              <none>"


def test_describe_node_shows_a_dead_plugin_and_a_missing_node(lab):
    lab.kill_plugin("h100-1")
    text = lab.kubectl("describe node h100-1").text
    allocatable = text.split("Allocatable:\n")[1].split("System Info:")[0]
    assert "  nvidia.com/gpu:     0" in allocatable
    assert re.search(r"^  nvidia.com/gpu +0 +0$", text, re.M)
    missing = lab.kubectl("describe node nope")
    assert (missing.text, missing.returncode) == ('Error from server (NotFound): nodes "nope" not found', 1)
    assert lab.kubectl("describe nodes/h100-0").text.startswith("Name:               h100-0\n")


def test_get_events_lists_them_by_object_as_the_api_server_does(lab):
    lab.advance(125)
    lines = lab.kubectl("get events").lines
    assert lines[0] == "LAST SEEN   TYPE      REASON             OBJECT      MESSAGE"
    assert [line.split()[2:4] for line in lines[1:]] == [
        ["Scheduled", "pod/infer"], ["FailedScheduling", "pod/notol"], ["Scheduled", "pod/train"]]
    assert lines[1] == ("2m5s        Normal    Scheduled          pod/infer   Successfully assigned "
                        "default/infer to h100-0")
    assert lab.kubectl("get events -A").lines[0].startswith("NAMESPACE   LAST SEEN   TYPE")
    assert lab.kubectl("get ev -n other").text == "No resources found in other namespace."


@pytest.mark.parametrize("command, what", [
    ("delete pod train", '"delete"'), ("get pods -o yaml", "-o yaml"), ("describe pod train", '"describe pod"'),
    ("get deployments", '"get deployments"'), ("get pods -l app=x", "the flag -l"),
    ("get pods train", '"get pods" with names'), ("get events -o wide", "get events -o wide"),
    ("describe node", "describe node without exactly one NAME"),
])
def test_what_the_sim_does_not_render_is_one_line_saying_what_it_does(lab, command, what):
    with pytest.raises(gpu_lab.GpuLabError) as err:
        lab.kubectl(command)
    msg = str(err.value)
    assert "\n" not in msg and what in msg
    assert msg.endswith("it renders get pods [-o wide] [-A | -n NAMESPACE], get nodes [-o wide] "
                        "[-L LABEL]..., get events [-A | -n NAMESPACE], describe node NAME")


def test_bad_input_is_one_line(lab):
    for bad in (None, "", "get pods 'open"):
        with pytest.raises(gpu_lab.GpuLabError, match="^kubectl"):
            lab.kubectl(bad)
    with pytest.raises(gpu_lab.GpuLabError, match="^kubectl: flag needs an argument: -n$"):
        lab.kubectl("get pods -n")


def test_an_empty_cluster():
    lab = gpu_lab.connect("sim")
    assert lab.kubectl("get nodes").text == "No resources found"
    assert lab.kubectl("get pods").text == "No resources found in default namespace."
    assert lab.kubectl("get pods -A").text == "No resources found"


def test_the_output_shows_in_a_notebook_as_preformatted_text(lab):
    out = lab.kubectl("get pods")
    assert str(out) == repr(out) == out.text
    assert out._repr_html_() == "<pre>" + out.text + "</pre>"
    shown = []

    class Printer:
        def text(self, t):
            shown.append(t)

    out._repr_pretty_(Printer(), False)
    assert shown == [out.text]
    assert KubectlOutput("x", "a<b&c")._repr_html_() == "<pre>a&lt;b&amp;c</pre>"


PREEMPTION = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata: {name: low}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 8}}}
"""


def test_a_preemption_victim_is_gone_as_on_a_real_cluster():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(H100_POOL.replace("count: 2\n", "count: 1\n") + "---\n" + PREEMPTION)
    lab.schedule()
    lab.apply(PREEMPTION.split("---\n")[1].replace("name: low", "name: urgent")
              .replace("spec:\n", "spec:\n  priorityClassName: high\n"))
    lab.schedule()
    assert [line.split()[:3] for line in lab.kubectl("get pods").lines[1:]] == [["urgent", "1/1", "Running"]]
    events = [line.split()[2:4] for line in lab.kubectl("get events").lines[1:]]
    assert ["Preempted", "pod/low"] in events and ["Scheduled", "pod/urgent"] in events


def test_a_gated_pod_shows_scheduling_gated():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: c, image: x}]
""")
    lab.schedule()
    assert lab.kubectl("get pods").lines[1].split()[:3] == ["gated", "0/1", "SchedulingGated"]
