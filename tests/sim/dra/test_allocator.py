"""The structured allocator: its order, constraints, modes, counters, taints and errors.

The model follows k8s.io/dynamic-resource-allocation v0.37.2 ``structured/internal/incubating``
(the variant kube-scheduler v1.37 uses); while it was written, its answers were compared with
that Go code's on thousands of random claims and slices, results and error texts alike.
"""

import pytest

from gpu_lab.model.objects import Node
from gpu_lab.sim.dra import validation as val
from gpu_lab.sim.dra.allocator import Allocator, AllocatorError, FailedOnNode

D = "gpu.nvidia.com"
CLASSES = {
    "gpu": {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")}}]}},
    "any": {"metadata": {"name": "any"}, "spec": {}},
}


def device(name, parent="p0", product="A", type_="gpu", consumes=None, taints=None):
    d = {"name": name, "attributes": {"type": {"string": type_}, "parent": {"string": parent},
                                      "productName": {"string": product}},
         "capacity": {"memory": {"value": "40Gi"}}}
    if consumes:
        d["consumesCounters"] = [{"counterSet": "gpu", "counters": {"slices": {"value": str(consumes)}}}]
    if taints:
        d["taints"] = taints
    return d


def rslice(name, devices=(), pool="n", node="n", count=1, counters=None, driver=D):
    spec = {"driver": driver, "nodeName": node, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}}
    if devices:
        spec["devices"] = list(devices)
    if counters is not None:
        spec["sharedCounters"] = [{"name": "gpu", "counters": {"slices": {"value": str(counters)}}}]
    return {"metadata": {"name": name}, "spec": spec}


def req(name, cls="gpu", count=None, selectors=(), mode=None, tolerations=None):
    body = {"deviceClassName": cls}
    if count is not None:
        body["count"] = count
    if mode:
        body["allocationMode"] = mode
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerations:
        body["tolerations"] = tolerations
    return {"name": name, "exactly": body}


def spec(*requests, constraints=()):
    errs = []
    out = val.claim_spec({"devices": {"requests": list(requests), "constraints": list(constraints)}}, "spec", errs)
    assert not errs
    return out


def allocate(slices, *claims, allocated=()):
    classes = {n: val.device_class(c, i) for i, (n, c) in enumerate(CLASSES.items())}
    a = Allocator(classes, [val.resource_slice(s) for s in slices], set(allocated))
    got = a.allocate(Node("n"), [(f"default/c{i}", c) for i, c in enumerate(claims)])
    return None if got is None else [[(r.request, r.device) for r in al.results] for al in got]


# ------------------------------------------------------------------ order


def test_devices_come_in_slice_name_order_then_device_order():
    slices = [rslice("n-b", [device("b0"), device("b1")], count=2), rslice("n-a", [device("a1"), device("a0")], count=2)]
    assert allocate(slices, spec(req("g", count=3))) == [[("g", "a1"), ("g", "a0"), ("g", "b0")]]


def test_pools_come_in_driver_then_pool_name_order_and_other_nodes_do_not_count():
    slices = [rslice("s1", [device("x")], pool="zeta"), rslice("s2", [device("y")], pool="alpha"),
              rslice("s3", [device("z")], pool="m", node="elsewhere")]
    assert allocate(slices, spec(req("g", count=2))) == [[("g", "y"), ("g", "x")]]


def test_claims_are_served_in_the_pods_order_and_allocated_devices_are_skipped():
    slices = [rslice("s", [device("d0"), device("d1"), device("d2")])]
    assert allocate(slices, spec(req("g")), spec(req("g")), allocated={(D, "n", "d0")}) == [
        [("g", "d1")], [("g", "d2")]]


def test_a_constraint_makes_the_allocator_backtrack_to_a_consistent_set():
    slices = [rslice("s", [device("d0", parent="p0"), device("d1", parent="p1"), device("d2", parent="p1")])]
    match = {"matchAttribute": "gpu.nvidia.com/parent"}
    assert allocate(slices, spec(req("g", count=2), constraints=[match])) == [[("g", "d1"), ("g", "d2")]]
    distinct = {"distinctAttribute": "gpu.nvidia.com/parent"}
    assert allocate(slices, spec(req("g", count=2), constraints=[distinct])) == [[("g", "d0"), ("g", "d1")]]
    assert allocate(slices, spec(req("g", count=3), constraints=[distinct])) is None


def test_a_constraint_limited_to_some_requests_leaves_the_others_free():
    slices = [rslice("s", [device("d0", parent="p0"), device("d1", parent="p1"), device("d2", parent="p1")])]
    c = {"matchAttribute": "gpu.nvidia.com/parent", "requests": ["b"]}
    assert allocate(slices, spec(req("a"), req("b", count=2), constraints=[c])) == [
        [("a", "d0"), ("b", "d1"), ("b", "d2")]]


# ------------------------------------------------------------------ modes and lists


def test_allocation_mode_all_takes_every_matching_device_or_nothing():
    slices = [rslice("s", [device("d0"), device("d1", type_="mig"), device("d2")])]
    assert allocate(slices, spec(req("g", mode="All"))) == [[("g", "d0"), ("g", "d2")]]
    assert allocate(slices, spec(req("g", mode="All")), allocated={(D, "n", "d2")}) is None


def test_first_available_takes_the_first_subrequest_that_fits():
    slices = [rslice("s", [device("d0", product="A"), device("d1", product="A")])]
    prio = {"name": "gpu", "firstAvailable": [
        {"name": "b", "deviceClassName": "gpu", "selectors": [{"cel": {"expression":
                                                                         "device.attributes['gpu.nvidia.com'].productName == 'B'"}}]},
        {"name": "two-a", "deviceClassName": "gpu", "count": 2}]}
    assert allocate(slices, spec(prio)) == [[("gpu/two-a", "d0"), ("gpu/two-a", "d1")]]


# ------------------------------------------------------------------ counters and taints


def test_shared_counters_limit_what_partitions_may_be_allocated_together():
    slices = [rslice("a-counters", counters=4, count=2),
              rslice("b-devices", [device("big", consumes=3), device("small1", consumes=1),
                                   device("small2", consumes=1)], count=2)]
    assert allocate(slices, spec(req("g", count=2))) == [[("g", "big"), ("g", "small1")]]
    assert allocate(slices, spec(req("g", count=3))) is None  # 3 + 1 + 1 > 4
    # devices allocated earlier consume the pool's counters too: 3 of 4 are gone with "big"
    assert allocate(slices, spec(req("g")), allocated={(D, "n", "big")}) == [[("g", "small1")]]
    assert allocate(slices, spec(req("g", count=2)), allocated={(D, "n", "big")}) is None


def test_noschedule_and_noexecute_taints_keep_devices_unless_tolerated():
    drain = [{"key": "maintenance", "value": "xid", "effect": "NoExecute"}]
    info = [{"key": "note", "effect": "None"}]
    slices = [rslice("s", [device("d0", taints=drain), device("d1", taints=info)])]
    assert allocate(slices, spec(req("g", count=2))) is None
    assert allocate(slices, spec(req("g"))) == [[("g", "d1")]]
    tolerate = [{"key": "maintenance", "operator": "Exists"}]
    assert allocate(slices, spec(req("g", count=2, tolerations=tolerate))) == [[("g", "d0"), ("g", "d1")]]


# ------------------------------------------------------------------ problems


def test_more_than_32_devices_in_one_claim_is_an_error_not_a_verdict():
    slices = [rslice("s", [device(f"d{i}") for i in range(40)])]
    with pytest.raises(AllocatorError) as err:
        allocate(slices, spec(req("g", count=33)))
    assert str(err.value) == ("claim default/c0, request g: adding 33 devices exceeds the claim limit of 32, "
                              "with 0 already accounted for")


def test_an_incomplete_pool_gives_nothing_and_cannot_answer_all():
    slices = [rslice("s", [device("d0")], count=2)]
    assert allocate(slices, spec(req("g"))) is None
    with pytest.raises(AllocatorError) as err:
        allocate(slices, spec(req("g", mode="All")))
    assert str(err.value) == ("claim default/c0, request g: asks for all devices, but resource pool "
                              "gpu.nvidia.com/n is currently being updated")


def test_an_invalid_pool_is_named_when_nothing_fits():
    slices = [rslice("s1", [device("d0")], count=2), rslice("s2", [device("d0")], count=2)]
    with pytest.raises(FailedOnNode) as err:
        allocate(slices, spec(req("g")))
    assert str(err.value) == "invalid resource pools were encountered"


def test_a_cel_runtime_error_names_the_claim_selector_and_device():
    slices = [rslice("s", [device("d0")])]
    with pytest.raises(AllocatorError) as err:
        allocate(slices, spec(req("g", selectors=["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"])))
    assert str(err.value).startswith("claim default/c0: selector #0 on device gpu.nvidia.com/n/d0: CEL runtime "
                                     "error: no such key: profile. consider using CEL optional chaining")
