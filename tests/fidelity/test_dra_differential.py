"""DRA on both backends: every scenario in tests/backends/dra/ on the simulator and on the
local backend (the real v1.37.2 control plane: kube-scheduler's DynamicResources, the
resourceclaim and device-taint-eviction controllers, gpu-lab's node agent as NVIDIA's DRA
driver), compared step by step.

After every step both must agree on: each workload's pods, as the multiset of (phase, node
pool, number of devices, device kinds) where a device kind is ``gpu`` (a whole GPU) or the
MIG profile of the partition (``mig-3g40gb``); each workload's pending messages; and the
multiset of what the nodes hold (pool, running pods, the kinds of the distinct devices they
hold: a claim shared by two pods holds one). Pods with template
claims enter the real scheduler's queue in no fixed order (the controller makes their claims
as it goes), so where several bare pods compete for the same devices (``RACY``) the pods
are compared together rather than per workload; where the order decides the outcome itself
(mig_partitions) the pods are created one at a time, in file order, on both backends.

One private lab, reset between scenarios. In CI (CI=true) the local half fails when the
control plane binaries are missing; elsewhere it skips.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab.errors import GpuLabError
from gpu_lab.model.documents import load_documents
from gpu_lab.sim.dra.state import dra_state

DRA = Path(__file__).parents[1] / "backends" / "dra"
CASES = sorted(p.stem for p in DRA.glob("*.yaml"))
AV = "resource.k8s.io/v1"
ALL = "*"  # the one group of a RACY scenario

#: bare pods that compete for the same devices: which one wins races on the real scheduler
RACY = {"prioritized_list", "side_by_side"}

#: scenarios where the sim is known to disagree with the real control plane, and why
SIM_BUGS: dict[str, str] = {}


def docs(name: str) -> list[dict]:
    return load_documents(DRA / f"{name}.yaml")


def steps(name: str) -> list[tuple[str, object]]:
    """What to do, in order; the outcome is compared after each step. ``apply`` is followed
    by ``schedule``; ``advance`` moves the clock (durations) and schedules."""
    documents = docs(name)
    if name == "device_taint":  # a rule that drains one_gpu's GPU, then the pod again
        pods = [d for d in docs("one_gpu") if d["kind"] == "Pod"]
        return [("apply", docs("one_gpu")), ("apply", documents), ("apply", pods)]
    if name == "job_takes_turns":  # two pods of 20s on one GPU
        return [("apply", documents), ("advance", 30), ("advance", 30)]
    if name == "mig_partitions":  # counters: who gets what depends on the order, so one at a time
        rest = [d for d in documents if d["kind"] != "Pod"]
        return [("apply", rest)] + [("apply", [d]) for d in documents if d["kind"] == "Pod"]
    return [("apply", documents)]


def kind_of(device: str) -> str:
    """``gpu`` for a whole GPU (gpu-0), the MIG profile for a partition (gpu-0-mig-3g40gb-9-0)."""
    m = re.fullmatch(r"gpu-\d+-mig-([0-9a-z+]+)-\d+-\d+", device)
    return f"mig-{m.group(1)}" if m else "gpu"


def claim_devices(lab) -> dict[str, list[str]]:
    """pod name -> names of the DRA devices allocated to the claims reserved for it."""
    out: dict[str, list[str]] = {}
    if lab.backend == "sim":
        for c in dra_state(lab._sim.cluster.snapshot).claims.values():  # noqa: SLF001
            for key in c.reserved_for:
                if c.allocation is not None:
                    out.setdefault(key.split("/", 1)[1], []).extend(r.device for r in c.allocation.results)
        return out
    for c in lab.client.list("ResourceClaim", namespace="default", api_version=AV)["items"]:
        status = c.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in status.get("reservedFor") or []:
            out.setdefault(r["name"], []).extend(x["device"] for x in results)
    return out


def workload_of(pod: str, jobs: set[str]) -> str:
    return next((j for j in jobs if re.fullmatch(rf"{re.escape(j)}-[a-z0-9]{{5}}", pod)), pod)


def outcome(lab, name: str, jobs: set[str]) -> dict:
    pods = lab.pods()
    pools = dict(zip(lab.nodes()["name"], lab.nodes()["pool"], strict=True))
    dra = claim_devices(lab)
    workloads: dict[str, Counter] = {}
    messages: dict[str, set[str]] = {}
    nodes: dict[str, list] = {n: [0, {}] for n in pools}
    for row in pods.itertuples():
        group = ALL if name in RACY else workload_of(row.name, jobs)
        held = {d: kind_of(d) for d in dra.get(row.name, [])}
        if row.name not in dra:  # nvidia.com/gpu from the device plugin has no claim: whole GPUs
            held = {uuid: "gpu" for uuids in (row.devices or {}).values() for uuid in uuids}
        kinds = tuple(sorted(held.values()))
        pool = pools.get(row.node) if isinstance(row.node, str) else None
        workloads.setdefault(group, Counter())[(row.phase, pool, len(kinds), kinds)] += 1
        if row.phase == "Pending":
            messages.setdefault(group, set()).add(row.message or "")
        if row.phase == "Running" and row.node in nodes:
            nodes[row.node][0] += 1
            nodes[row.node][1].update(held)  # a shared claim's device counts once
    usage = Counter((pools[n], count, tuple(sorted(devs.values()))) for n, (count, devs) in nodes.items())
    return {"pods": workloads, "pending messages": messages, "node usage": usage}


def run(lab, name: str) -> list[dict]:
    """The same calls on either backend; the outcome after each step (or the error)."""
    jobs = {d["metadata"]["name"] for d in docs(name) if d["kind"] == "Job"}
    out = []
    for what, arg in steps(name):
        try:
            if what == "apply":
                lab.apply(arg)
                lab.schedule()
            else:
                lab.advance(arg)
                lab.schedule()
        except GpuLabError as err:
            out.append({"error": str(err)})
            break
        out.append(outcome(lab, name, jobs))
    return out


def differences(sim: list[dict], real: list[dict]) -> list[str]:
    diff = []
    if len(sim) != len(real):
        diff.append(f"steps: sim {len(sim)} vs real {len(real)}")
    for i, (s, r) in enumerate(zip(sim, real, strict=False)):
        for key in sorted(set(s) | set(r)):
            if s.get(key) != r.get(key):
                diff.append(f"step {i} {key}:\n  sim:  {s.get(key)}\n  real: {r.get(key)}")
    return diff


def known_bug(name: str, agrees: bool) -> None:
    """A scenario in SIM_BUGS is an expected failure until the sim is fixed, then a reminder."""
    if name in SIM_BUGS:
        if agrees:
            pytest.fail(f"{name} now agrees with the real control plane: remove it from SIM_BUGS")
        pytest.xfail(SIM_BUGS[name])


# =========================================================================== no cluster


def test_every_scenario_is_compared():
    assert len(CASES) == 13
    assert set(CASES) >= RACY | set(SIM_BUGS)


@pytest.mark.parametrize("name", CASES)
def test_the_scenario_runs_on_the_sim(name):
    got = run(gpu_lab.connect("sim", seed=0), name)
    assert got and (name == "bad_cel") == ("error" in got[-1])


# =========================================================================== a real lab


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the DRA differential tests", timeout=60)


@pytest.mark.controlplane
@pytest.mark.parametrize("name", CASES)
def test_the_sim_agrees_with_the_real_control_plane(name, local):
    local.reset()
    started = time.monotonic()
    real = run(local, name)
    assert time.monotonic() - started < 60, "a scenario must not hang"
    sim = run(gpu_lab.connect("sim", seed=0), name)
    diff = differences(sim, real)
    known_bug(name, not diff)
    assert not diff, "\n".join(diff)
