"""The DRA examples learners meet, on the embedded scheduler, from the same YAML files (and with
the same expectations) as the local backend's suite on the real v1.37.2 control plane
(tests/backends/local/test_dra_local.py)."""

import re

from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.model.documents import load_documents

from .kit import (
    CANNOT,
    SCENARIOS,
    allocated,
    by_name,
    claim_of,
    dump,
    exactly,
    lab_with,
    pod,
    pool,
    profile,
    state,
    template,
)


def test_a_claim_for_one_gpu_is_allocated_and_the_pod_runs_with_it():
    lab = lab_with("one_gpu")
    p = by_name(lab.schedule()).loc["train"]
    uuid = gpu_uuids("a100-0", 2)[0]
    assert (p["node"], p["phase"], p["devices"]) == ("a100-0", "Running", {"gpu.nvidia.com": [uuid]})
    claim = claim_of(lab, "train")
    assert re.fullmatch(r"train-gpu-[bcdfghjklmnpqrstvwxz2456789]{5}", claim.name)  # the controller's name
    assert claim.owner_pod == "default/train"
    assert allocated(claim) == [("gpu", "a100-0", "gpu-0")]
    assert claim.allocation.node == "a100-0"


def test_any_gpu_with_at_least_40gi_via_cel():
    lab = lab_with("cel_memory")
    assert by_name(lab.schedule()).loc["big", "node"] == "a100-0"
    assert allocated(claim_of(lab, "big"))[0][1] == "a100-0"
    # explain shows why the L4 node is out, in the scheduler's words
    assert lab.explain("big").filters.loc["l4-0", "DynamicResources"] == "cannot allocate all claims"


def test_one_claim_shared_by_two_pods():
    lab = lab_with("shared_claim")
    pods = by_name(lab.schedule())
    assert (pods["phase"] == "Running").all() and pods["node"].nunique() == 1
    assert pods.loc["reader", "devices"] == pods.loc["writer", "devices"]
    shared = state(lab).claims["default/shared-gpu"]
    assert sorted(shared.reserved_for) == ["default/reader", "default/writer"]
    assert len(allocated(shared)) == 1


def test_a_shared_claim_stays_allocated_until_its_last_pod_is_gone():
    lab = lab_with("shared_claim")
    lab.schedule()
    shared = state(lab).claims["default/shared-gpu"]
    lab.delete("writer")
    assert shared.reserved_for == ["default/reader"] and shared.allocation is not None
    lab.delete("reader")
    assert shared.reserved_for == [] and shared.allocation is None  # deallocated, not deleted
    assert "default/shared-gpu" in state(lab).claims


def test_two_mig_devices_on_the_same_gpu_with_match_attribute():
    lab = lab_with("mig_same_gpu")
    pods = by_name(lab.schedule())
    assert pods.loc["pair", "phase"] == "Running"
    devices = [d for _, _, d in allocated(claim_of(lab, "pair"))]
    # all-balanced puts the two 1g.5gb of each GPU at memory slices 2 and 3: gpu-0's come first
    assert devices == ["gpu-0-mig-1g5gb-19-2", "gpu-0-mig-1g5gb-19-3"]
    assert len(pods.loc["pair", "devices"]["gpu.nvidia.com"]) == 2
    assert (pods.loc["trio", "phase"], pods.loc["trio", "message"]) == ("Pending", CANNOT.format(n=1))


def test_match_attribute_moves_both_partitions_to_the_gpu_that_has_room_for_both():
    docs = [pool("h100", "H100-80GB", 2, dynamicMIG=True),
            template("4g", [exactly("mig", "mig.nvidia.com", selectors=[profile("4g.40gb")])]),
            template("3g-and-1g", [exactly("big", "mig.nvidia.com", selectors=[profile("3g.40gb")]),
                                   exactly("small", "mig.nvidia.com", selectors=[profile("1g.10gb")])],
                     [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]),
            pod("first", template_name="4g", ref="mig"), pod("pair", template_name="3g-and-1g", ref="mig")]
    lab = lab_with(dump(docs))
    assert set(lab.schedule()["phase"]) == {"Running"}
    assert allocated(claim_of(lab, "first")) == [("mig", "h100-0", "gpu-0-mig-4g40gb-5-0")]
    # gpu-0 still has a 3g.40gb at slice 4, but then no compute left for the 1g: both go to gpu-1
    assert allocated(claim_of(lab, "pair")) == [("big", "h100-0", "gpu-1-mig-3g40gb-9-0"),
                                                ("small", "h100-0", "gpu-1-mig-1g10gb-19-4")]


def test_a_prioritized_list_h100_else_two_a100s():
    lab = lab_with("prioritized_list")
    pods = by_name(lab.schedule())
    assert allocated(claim_of(lab, "first")) == [("gpu/h100", "h100-0", "gpu-0")]
    assert allocated(claim_of(lab, "second")) == [("gpu/two-a100", "a100-0", "gpu-0"),
                                                  ("gpu/two-a100", "a100-0", "gpu-1")]
    assert (pods.loc["third", "phase"], pods.loc["third", "message"]) == ("Pending", CANNOT.format(n=2))


def test_the_first_choice_scores_higher_when_both_fit():
    documents = load_documents(SCENARIOS / "prioritized_list.yaml")
    lab = lab_with(dump(documents[:4]))  # the pools, the template and the pod "first"
    lab.schedule()
    scores = lab.explain("first").scores
    assert scores.loc["h100-0", ("DynamicResources", "raw")] == 8  # 8 - index 0
    assert scores.loc["a100-0", ("DynamicResources", "raw")] == 7  # 8 - index 1
    assert scores.loc["h100-0", ("DynamicResources", "weighted")] == 200


def test_a_noexecute_device_taint_drains_the_gpu():
    lab = lab_with("one_gpu")
    lab.schedule()
    assert allocated(claim_of(lab, "train")) == [("gpu", "a100-0", "gpu-0")]
    lab.apply(SCENARIOS / "device_taint.yaml")
    lab.schedule()  # the controllers run: the device-taint-eviction controller deletes the pod
    assert lab.pods().empty
    assert not state(lab).claims  # its template claim went with it
    lab.apply(dump([d for d in load_documents(SCENARIOS / "one_gpu.yaml") if d["kind"] == "Pod"]))
    assert by_name(lab.schedule()).loc["train", "phase"] == "Running"
    assert allocated(claim_of(lab, "train")) == [("gpu", "a100-0", "gpu-1")]


def test_a_tolerated_taint_keeps_the_pod_and_a_noschedule_taint_only_stops_new_claims():
    tolerant = template("tolerant", [exactly("gpu", tolerations=[{"key": "gpulab.dev/maintenance",
                                                                  "operator": "Exists"}])])
    lab = lab_with("one_gpu", dump([tolerant, pod("stays", template_name="tolerant")]))
    lab.schedule()
    assert allocated(claim_of(lab, "stays")) == [("gpu", "a100-0", "gpu-1")]
    lab.apply(dump([{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "t"},
                     "spec": {"deviceSelector": {"pool": "a100-0", "device": "gpu-1"},
                              "taint": {"key": "gpulab.dev/maintenance", "effect": "NoExecute"}}}]))
    assert set(lab.schedule()["name"]) == {"train", "stays"}
    lab.apply(dump([{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "full"},
                     "spec": {"deviceSelector": {"pool": "a100-0", "device": "gpu-0"},
                              "taint": {"key": "gpulab.dev/full", "effect": "NoSchedule"}}}]))
    lab.delete("stays")
    lab.apply(dump([pod("plain", template_name="one-gpu"), pod("new", template_name="tolerant")]))
    pods = by_name(lab.schedule())
    assert pods.loc["train", "phase"] == "Running"  # NoSchedule does not evict
    assert allocated(claim_of(lab, "new")) == [("gpu", "a100-0", "gpu-1")]
    assert (pods.loc["plain", "phase"], pods.loc["plain", "message"]) == ("Pending", CANNOT.format(n=1))


def test_nvidia_gpu_requests_are_served_through_dra_on_a_node_without_the_device_plugin():
    lab = lab_with("extended_resource")
    p = by_name(lab.schedule()).loc["legacy"]
    uuid = gpu_uuids("a100-0", 2)[0]
    assert (p["node"], p["phase"], p["devices"]) == ("a100-0", "Running", {"nvidia.com/gpu": [uuid]})
    claim = claim_of(lab, "legacy")
    assert re.fullmatch(r"legacy-extended-resources-[a-z0-9]{5}", claim.name)
    assert claim.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert [(r.name, r.exactly.class_name, r.exactly.count) for r in claim.spec.requests] == [
        ("container-0-request-0", "gpu.nvidia.com", 1)]
    assert allocated(claim) == [("container-0-request-0", "a100-0", "gpu-0")]


def test_a_device_plugin_node_keeps_serving_nvidia_gpu_itself():
    plugin_pool = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "dp"},
                   "spec": {"count": 1, "gpu": {"model": "A100-40GB", "count": 1}}}
    lab = lab_with("extended_resource", dump([plugin_pool, {**load_documents(SCENARIOS / "extended_resource.yaml")[1],
                                                            "metadata": {"name": "second"}}]))
    pods = by_name(lab.schedule())
    assert set(pods["node"]) == {"a100-0", "dp-0"}
    served = pods.set_index("node").loc["dp-0"]
    assert served["devices"] == {"nvidia.com/gpu": gpu_uuids("dp-0", 1)}  # the device plugin's, no claim
    assert len(state(lab).claims) == 1


def test_finished_pods_free_their_devices_for_the_next_pod():
    docs = [pool("a100", "A100-40GB", 1), template("one", [exactly("gpu")]),
            pod("a", template_name="one", duration="1h"), pod("b", template_name="one", duration="1h")]
    lab = lab_with(dump(docs))
    pods = by_name(lab.schedule())
    assert list(pods["phase"]) == ["Running", "Pending"]
    assert pods.loc["b", "message"] == CANNOT.format(n=1)
    lab.advance(3600)
    pods = by_name(lab.pods())
    assert list(pods["phase"]) == ["Succeeded", "Running"]
    assert allocated(claim_of(lab, "b")) == [("gpu", "a100-0", "gpu-0")]
    assert len(state(lab).claims) == 1  # a's claim was made for a and went with it


def test_an_autoscaled_dra_pool_grows_for_pods_whose_claims_fit_no_node():
    autoscaled = pool("a100", "A100-40GB", 1)
    del autoscaled["spec"]["count"]
    autoscaled["spec"]["autoscaling"] = {"minCount": 0, "maxCount": 2, "provisioningDelay": "5m"}
    lab = lab_with(dump([autoscaled, template("one", [exactly("gpu")]),
                         pod("a", template_name="one"), pod("b", template_name="one")]))
    assert set(lab.schedule()["phase"]) == {"Pending"}
    assert (lab.autoscaler_events()["reason"] == "TriggeredScaleUp").any()  # it asked: the claims fit a new node
    pods = by_name(lab.advance(600))
    assert list(pods["phase"]) == ["Running", "Running"] and pods["node"].nunique() == 2


def test_a_pending_pods_template_claim_goes_with_the_pod():
    lab = lab_with("too_many_devices")
    lab.schedule()
    assert [c.owner_pod for c in state(lab).claims.values()] == ["default/greedy"]
    lab.delete("greedy")
    assert not state(lab).claims


def test_each_pod_of_a_job_gets_its_own_claim_from_the_template():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}, "spec": {
        "parallelism": 2, "completions": 2, "template": {
            "metadata": {"annotations": {"gpulab.dev/duration": "10m"}},
            "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}],
                     "containers": [{"name": "c", "image": "app", "resources": {"claims": [{"name": "gpu"}]}}]}}}}
    lab = lab_with(dump([pool("a100", "A100-40GB", 2), template("one", [exactly("gpu")]), job]))
    pods = lab.schedule()
    claims = {c.owner_pod: allocated(c) for c in state(lab).claims.values()}
    assert sorted(claims) == sorted(f"default/{n}" for n in pods["name"])
    assert sorted(d for (_, _, d), in claims.values()) == ["gpu-0", "gpu-1"]
    lab.advance(700)
    assert lab.jobs().loc[0, "state"] == "Complete" and not state(lab).claims
