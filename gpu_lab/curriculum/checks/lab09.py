"""Lab 09 checks: four inference services on a mixed H100/A100 fleet, placed with DRA claims.

The fleet is fixed (``CLUSTER``: one node with two H100-80GB GPUs whose MIG partitions
NVIDIA's DRA driver offers dynamically, and one node with two whole A100-40GB GPUs).
The services are fixed too (``SERVICES``: the pods of
``lessons/scenarios/09_lab_services.yaml``, each with the GPU memory it needs on every
device it holds, ``gpulab.dev/gpu-memory``). What the learner changes is how each pod
asks for devices: ResourceClaimTemplates, DeviceClasses, CEL selectors, constraints.

The checks place the fleet and the submission on the simulator's kube-scheduler model and
read which devices each pod got (``lab.pods()``'s devices column: the UUIDs the kubelet
plugin would expose), then say, naming pods, devices and numbers, what is still wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...connection import connect
from ...dradriver.resourceslices import published_devices
from ...errors import GpuLabError
from ...gpus import get_model
from ...gpus.mig import geometry
from ...model.quantity import parse_quantity
from ...model.scenario import load_scenario
from .feedback import Checklist
from .manifests import hardware_problem, read_manifests

__all__ = ["HINTS", "CLUSTER", "SERVICES", "Service", "check_all_running", "check_memory",
           "check_no_whole_h100", "check_tensor_parallel", "documents", "run", "work_problems"]

TITLE = "Lab 09"

HINTS = (
    "Start from the pending service and the claims: `kubectl get pods` and `kubectl describe pod translate-tp`, "
    "then `kubectl get resourceclaims -o wide` (which device each claim got) and "
    "`kubectl get resourceslices -o yaml` (each device's attributes and capacity).",
    "A claim's request says which devices qualify with CEL over the ResourceSlice's attributes and capacity, "
    "e.g. device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0, or a MIG profile "
    "attribute; a device class (gpu.nvidia.com, mig.nvidia.com) picks whole GPUs or MIG partitions.",
    "Two devices on one physical GPU: a claim's constraints with matchAttribute over the parent GPU's "
    "attribute (gpu.nvidia.com/parentUUID). Mind the MIG placement rules: which profiles fit next to a "
    "3g.40gb on one H100?",
    "The answer: llm uses a template for one gpu.nvidia.com device with memory >= 70Gi; ranker one "
    "mig.nvidia.com device with profile 3g.40gb; translate-tp two mig.nvidia.com devices with profile 1g.20gb "
    "and constraints [{matchAttribute: gpu.nvidia.com/parentUUID}]; ocr keeps its claim.",
)


def documents(submission: Any) -> list[dict]:
    """The submission as a list of manifests: YAML text, a path to a YAML file, a dict or a list."""
    return read_manifests(submission, TITLE)


MEMORY = "gpulab.dev/gpu-memory"
GIB = 1024 ** 3
MIB = 1024 ** 2

CLUSTER = """\
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 1, gpu: {model: H100-80GB, count: 2}, dra: {dynamicMIG: true}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec: {count: 1, gpu: {model: A100-40GB, count: 2}, dra: {}}
"""

# The fleet is fixed: a submission may not bring hardware of its own.
HARDWARE_KINDS = ("NodePool", "Node", "ResourceSlice")
# The MIG slice a service "fits" when its memory is at most this (H100 3g.40gb, 40192 MiB).
SLICE_PROFILE = "3g.40gb"
TP_SERVICE = "translate-tp"


@dataclass(frozen=True)
class Service:
    name: str
    memory: str  # needed on every device the pod holds
    devices: int  # how many devices the process uses (tensor-parallel ranks)

    @property
    def memory_bytes(self) -> int:
        return int(parse_quantity(self.memory))


SERVICES = (
    Service("ocr", "12Gi", 1),
    Service("ranker", "30Gi", 1),
    Service(TP_SERVICE, "16Gi", 2),
    Service("llm", "70Gi", 1),
)


# ------------------------------------------------------------------ the fleet's devices
@dataclass(frozen=True)
class Device:
    """One device NVIDIA's DRA driver publishes on the fleet, found by its UUID."""

    node: str
    name: str  # gpu-1, gpu-0-mig-3g40gb-9-0
    gpu: int
    type: str  # "gpu" or "mig"
    product: str
    model: str
    profile: str | None
    memory_mib: int

    @property
    def physical(self) -> str:
        return f"{self.node} gpu-{self.gpu}"

    def describe(self) -> str:
        what = f"MIG {self.profile}" if self.type == "mig" else f"whole {self.model}"
        return f"{self.name} on {self.node} ({what}, {_gib(self.memory_mib * MIB)})"


def _devices() -> dict[str, Device]:
    out: dict[str, Device] = {}
    for node in load_scenario(CLUSTER).nodes:
        model = get_model(node.raw["nodePool"]["gpu"]["model"])
        for dev in published_devices(node).values():
            if dev.type == "mig" and dev.profile is not None:  # a MIG device always names its profile
                mem = geometry(model).profile(dev.profile).memory_mib
            else:
                mem = model.memory_mib
            out[dev.uuid] = Device(node.name, dev.name, dev.gpu, dev.type, model.product, model.name,
                                   dev.profile, mem)
    return out


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.4g}Gi"


# ------------------------------------------------------------------ running a submission
def work_problems(submission: Any) -> list[str]:
    """What the submission changed about the services themselves (empty when nothing)."""
    docs = documents(submission)
    problems: list[str] = []
    hardware = hardware_problem(docs, HARDWARE_KINDS, "the fleet is fixed (lab09.CLUSTER)")
    if hardware is not None:
        problems.append(hardware)
    pods = {(d.get("metadata") or {}).get("name"): d for d in docs if d.get("kind") == "Pod"}
    for s in SERVICES:
        pod = pods.get(s.name)
        if pod is None:
            problems.append(f"Pod {s.name} is missing: the service still has to run")
            continue
        got = ((pod.get("metadata") or {}).get("annotations") or {}).get(MEMORY)
        if got != s.memory:
            problems.append(f"{s.name} says {MEMORY}: {got!r}, the service needs {s.memory}: "
                            "change how it asks for devices, not what it needs")
    return problems


def run(submission: Any) -> pd.DataFrame:
    """Place the fleet and the submission on the simulator; one row per service pod.

    Columns: name, node, phase, held (what the pod got, in words), message, and devices
    (a list of ``Device``).
    """

    lab = connect("sim", seed=0)
    lab.apply(CLUSTER)
    lab.apply(documents(submission))
    pods = lab.schedule()
    known = _devices()
    rows = []
    for _, p in pods.iterrows():
        uuids = [u for ids in (p["devices"] or {}).values() for u in ids]
        devices = [known[u] for u in uuids if u in known]
        rows.append({"name": p["name"], "node": p["node"], "phase": p["phase"],
                     "held": "; ".join(d.describe() for d in devices), "message": p["message"],
                     "devices": devices})
    return pd.DataFrame(rows, columns=["name", "node", "phase", "held", "message", "devices"])


def _service_rows(submission: Any) -> tuple[Checklist, pd.DataFrame | None]:
    c = Checklist(TITLE, look="kubectl get resourceclaims -o wide")
    problems = work_problems(submission)
    c.require(not problems, "; ".join(problems), "the submission still runs the four services unchanged")
    if any("hardware" in p for p in problems):
        return c, None
    try:
        return c, run(submission).set_index("name")
    except GpuLabError as err:  # the API server refused a manifest: its own words
        c.require(False, f"the submission was not applied: {err}")
        return c, None


# ------------------------------------------------------------------ checks
def check_all_running(submission: Any):
    """Every service pod is Running."""
    c, pods = _service_rows(submission)
    if pods is not None:
        waiting = [s.name for s in SERVICES if s.name in pods.index and pods.loc[s.name, "phase"] != "Running"]
        lines = [f"{n}: {pods.loc[n, 'message'] or 'not in the scheduling queue (does its claim or template exist?)'}"
                 for n in waiting]
        running = sum(1 for s in SERVICES if s.name in pods.index and pods.loc[s.name, "phase"] == "Running")
        c.require(not waiting,
                  f"{running} of {len(SERVICES)} services Running; pending: " + "; ".join(lines),
                  f"all {len(SERVICES)} services Running")
    return c.done()


def check_memory(submission: Any):
    """Every device a service holds has at least the memory the service needs."""
    c, pods = _service_rows(submission)
    if pods is not None:
        short, unplaced = [], []
        for s in SERVICES:
            if s.name not in pods.index or pods.loc[s.name, "phase"] != "Running":
                unplaced.append(s.name)
                continue
            for d in pods.loc[s.name, "devices"]:
                if d.memory_mib * MIB < s.memory_bytes:
                    short.append(f"{s.name} needs {s.memory} per device and got {d.describe()}: "
                                 f"{_gib(s.memory_bytes - d.memory_mib * MIB)} short")
        c.require(not unplaced, f"no devices yet for {', '.join(unplaced)} (not Running)",
                  "every service holds devices")
        c.require(not short, "; ".join(short) + ". A CEL selector on device.capacity['gpu.nvidia.com'].memory "
                  "(or a MIG profile) says how much a device must have",
                  "every device holds at least the memory its service needs")
    return c.done()


def check_tensor_parallel(submission: Any):
    """translate-tp holds two MIG devices, both on one physical GPU."""
    c, pods = _service_rows(submission)
    if pods is not None:
        tp = next(s for s in SERVICES if s.name == TP_SERVICE)
        row = pods.loc[TP_SERVICE] if TP_SERVICE in pods.index else None
        if row is None or row["phase"] != "Running":
            msg = "" if row is None else f": {row['message']}"
            c.require(False, f"{TP_SERVICE} is not Running{msg}")
        else:
            devs = row["devices"]
            kinds = ", ".join(d.describe() for d in devs)
            c.require(len(devs) == tp.devices and all(d.type == "mig" for d in devs),
                      f"{TP_SERVICE} holds {len(devs)} device(s) ({kinds}); its {tp.devices} ranks want "
                      f"{tp.devices} MIG devices", f"{TP_SERVICE} holds {tp.devices} MIG devices")
            gpus = sorted({d.physical for d in devs})
            c.require(len(gpus) == 1,
                      f"{TP_SERVICE}'s devices sit on {len(gpus)} physical GPUs ({', '.join(gpus)}): "
                      "constraints.matchAttribute on gpu.nvidia.com/parentUUID keeps them on one",
                      f"both on {gpus[0] if gpus else '?'}")
    return c.done()


def check_no_whole_h100(submission: Any):
    """No service that fits a 3g.40gb slice holds a whole H100."""

    slice_mib = geometry(get_model("H100-80GB")).profile(SLICE_PROFILE).memory_mib
    c, pods = _service_rows(submission)
    if pods is not None:
        waste = []
        for s in SERVICES:
            if s.memory_bytes > slice_mib * MIB or s.name not in pods.index:
                continue
            whole = [d for d in pods.loc[s.name, "devices"] if d.type == "gpu" and d.model == "H100-80GB"]
            waste += [f"{s.name} ({s.memory}) holds {d.describe()}, but a {SLICE_PROFILE} slice "
                      f"({_gib(slice_mib * MIB)}) fits it and leaves 4 of 7 compute slices for others"
                      for d in whole]
        c.require(not waste, "; ".join(waste),
                  f"no service that fits a {SLICE_PROFILE} slice ({_gib(slice_mib * MIB)}) holds a whole H100")
    return c.done()
