"""Bad DRA input: one line in kube-apiserver's or kube-scheduler's own words, never a traceback.

The expected texts are the ones the real v1.37.2 control plane printed for the same YAML
(tests/backends/dra, recorded by the local backend's suite).
"""

import pytest

from gpu_lab.errors import GpuLabError, InvalidObject
from gpu_lab.model.documents import load_documents
from gpu_lab.sim.framework import ERROR
from gpu_lab.sim.plugins.dynamicresources import DynamicResources

from .kit import (
    AV,
    CANNOT,
    PREEMPTION,
    SCENARIOS,
    by_name,
    claim,
    dump,
    exactly,
    lab_with,
    pod,
    pool,
    profile,
    state,
    template,
)

EXPECTING = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
             "BYTES, IDENTIFIER}")


def refused(*sources) -> str:
    lab = lab_with()
    with pytest.raises(GpuLabError) as err:
        for src in sources:
            lab.apply(SCENARIOS / f"{src}.yaml" if "\n" not in src else src)
    assert "\n" not in str(err.value)
    return str(err.value)


# ------------------------------------------------------------------ kube-apiserver


def test_cel_that_does_not_compile_is_refused_by_the_api_server():
    assert refused("bad_cel") == (
        'ResourceClaimTemplate.resource.k8s.io "bad-cel" is invalid: spec.spec.devices.requests[0].exactly.'
        "selectors[0].cel.expression: Invalid value: \"device.attributes['gpu.nvidia.com'].productName ==\": "
        f"compilation failed: ERROR: <input>:1:51: Syntax error: mismatched input '<EOF>' expecting {EXPECTING}"
        "  | device.attributes['gpu.nvidia.com'].productName ==  | " + "." * 50 + "^")


def test_a_device_class_with_a_type_error_is_refused():
    broken = {"apiVersion": AV, "kind": "DeviceClass", "metadata": {"name": "broken.example.com"},
              "spec": {"selectors": [{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory >= '40Gi'"}}]}}
    assert refused(dump([broken])) == (
        'DeviceClass.resource.k8s.io "broken.example.com" is invalid: spec.selectors[0].cel.expression: Invalid '
        "value: \"device.capacity['gpu.nvidia.com'].memory >= '40Gi'\": compilation failed: ERROR: <input>:1:42: "
        "found no matching overload for '_>=_' applied to '(kubernetes.Quantity, string)'  | "
        "device.capacity['gpu.nvidia.com'].memory >= '40Gi'  | " + "." * 41 + "^")


def test_a_match_attribute_without_a_domain_is_refused():
    bad = claim("z", [exactly("gpu")], [{"matchAttribute": "parentUUID"}])
    assert refused(dump([bad])) == (
        'ResourceClaim.resource.k8s.io "z" is invalid: spec.devices.constraints[0].matchAttribute: Invalid value: '
        '"parentUUID": a fully qualified name must be a domain and a name separated by a slash')


def test_the_v1beta1_layout_under_v1_is_a_strict_decoding_error():
    old = claim("old", [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}])
    assert refused(dump([old])) == (
        'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: strict decoding error: unknown field '
        '"spec.devices.requests[0].deviceClassName", unknown field "spec.devices.requests[0].count"')


def test_a_count_of_the_wrong_type_is_a_decoding_error():
    bad = template("t", [exactly("gpu", count="two")])
    assert refused(dump([bad])) == (
        'ResourceClaimTemplate in version "v1" cannot be handled as a ResourceClaimTemplate: json: cannot unmarshal '
        "string into Go struct field ExactDeviceRequest.spec.spec.devices.requests.exactly.count of type int64")


def test_every_error_of_a_claim_is_reported_at_once_and_count_zero_is_defaulted():
    bad = claim("many", [exactly("GPU"), {"name": "x"}, exactly("ok", count=0)])
    with pytest.raises(InvalidObject) as err:
        lab_with(dump([bad]))
    assert err.value.errors == [
        'spec.devices.requests[0].name: Invalid value: "GPU": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.devices.requests[1]: Required value: exactly one of `exactly` or `firstAvailable` is required"]


def test_a_pod_naming_a_claim_it_does_not_declare_is_refused():
    p = pod("p", template_name="t")
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    assert refused(dump([p])) == ('Pod "p" is invalid: spec.containers[0].resources.claims[0]: Not found: "gpus": '
                                  "must be one of the names in pod.spec.resourceClaims: gpu")


def test_objects_are_created_once_and_in_namespaces_that_exist():
    assert refused(dump([claim("c", [exactly("gpu")]), claim("c", [exactly("gpu")])])) == (
        'resourceclaims.resource.k8s.io "c" already exists')
    elsewhere = {**claim("c", [exactly("gpu")]), "metadata": {"name": "c", "namespace": "ml"}}
    assert refused(dump([elsewhere])) == 'namespaces "ml" not found'


def test_nothing_is_half_applied():
    lab = lab_with()
    with pytest.raises(GpuLabError):
        lab.apply(dump([template("good", [exactly("gpu")]), claim("bad", [exactly("gpu", count=-1)])]))
    assert not state(lab).templates and not state(lab).claims


# ------------------------------------------------------------------ kube-scheduler


def test_a_claim_for_a_device_class_that_does_not_exist_pends_with_the_schedulers_words():
    lab = lab_with("missing_class")
    p = by_name(lab.schedule()).loc["orphan"]
    assert (p["phase"], p["message"]) == (
        "Pending", "0/1 nodes are available: request gpu: device class tpu.example.com does not exist. "
        + PREEMPTION.format(n=1))


def test_a_missing_class_of_a_subrequest_names_the_subrequest():
    prio = {"name": "gpu", "firstAvailable": [{"name": "h100", "deviceClassName": "h100.example.com"}]}
    lab = lab_with(dump([pool("a100", "A100-40GB", 1), template("t", [prio]), pod("p", template_name="t")]))
    assert lab.schedule().loc[0, "message"].startswith(
        "0/1 nodes are available: request gpu/h100: device class h100.example.com does not exist.")


def test_more_devices_than_any_node_has():
    lab = lab_with("too_many_devices")
    p = by_name(lab.schedule()).loc["greedy"]
    assert (p["phase"], p["message"]) == ("Pending", CANNOT.format(n=2))
    # explain adds gpu-lab's reading of the claim under the scheduler's verdict
    notes = lab.explain("greedy").notes
    assert notes[-1] == ("DRA:   request gpus wants 5 device(s) of class gpu.nvidia.com; matching devices per "
                         "node: a100-0 2 (2 free), a100-1 2 (2 free)")


def test_counters_that_cannot_be_satisfied():
    # a 7g.80gb takes every counter of the GPU: nothing else fits in the same claim or after it
    seven_and_one = template("7g-and-1g", [exactly("a", "mig.nvidia.com", selectors=[profile("7g.80gb")]),
                                           exactly("b", "mig.nvidia.com", selectors=[profile("1g.10gb")])])
    eight = template("eight", [exactly("m", "mig.nvidia.com", count=8, selectors=[profile("1g.10gb")])])
    lab = lab_with(dump([pool("h100", "H100-80GB", 1, dynamicMIG=True), seven_and_one, eight,
                         pod("p", template_name="7g-and-1g"), pod("q", template_name="eight")]))
    pods = by_name(lab.schedule())
    assert list(pods["message"]) == [CANNOT.format(n=1)] * 2
    assert "cannot allocate all claims" in str(lab.explain("p"))


def test_cel_that_fails_at_run_time_stops_the_attempt_with_the_allocators_error():
    docs = load_documents(SCENARIOS / "one_gpu.yaml")
    docs[1]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]
    lab = lab_with(dump(docs))
    p = by_name(lab.schedule()).loc["train"]
    assert p["phase"] == "Pending"
    assert ('running "DynamicResources" filter plugin: claim default/train-gpu-' in p["message"]
            and ": selector #0 on device gpu.nvidia.com/a100-0/gpu-0: CEL runtime error: no such key: profile. "
            "consider using CEL optional chaining" in p["message"])


def test_the_plugin_reports_an_allocator_error_as_an_error_status():
    docs = [pool("a100", "A100-40GB", 1), template("big", [exactly("gpus", count=33)]), pod("p", template_name="big")]
    lab = lab_with(dump(docs))
    lab.schedule()
    p = next(r.pod for r in lab._sim.cluster.records.values())  # noqa: SLF001

    class Ctx:  # what PreFilter reads of a cycle
        snapshot, pod, data = lab._sim.cluster.snapshot, p, {}  # noqa: SLF001

    st = DynamicResources().pre_filter(Ctx)
    (made,) = state(lab).claims.values()
    assert (st.code, st.message()) == (ERROR, f'running "DynamicResources" filter plugin: claim default/{made.name}, '
                                       "request gpus: adding 33 devices exceeds the claim limit of 32, with 0 "
                                       "already accounted for")


def test_a_missing_template_keeps_the_pod_out_of_the_queue_without_a_message():
    docs = [d for d in load_documents(SCENARIOS / "one_gpu.yaml") if d["kind"] != "ResourceClaimTemplate"]
    lab = lab_with(dump(docs))
    p = by_name(lab.schedule()).loc["train"]
    assert (p["phase"], p["message"]) == ("Pending", "")
    assert lab.explain("train").message == ('not queued (PreEnqueue DynamicResources): pod "default/train": '
                                            "ResourceClaim not created yet")


def test_a_missing_claim_keeps_the_pod_out_of_the_queue():
    lab = lab_with(dump([pool("a100", "A100-40GB", 1), pod("p", claim_name="nope")]))
    assert lab.schedule().loc[0, "message"] == ""
    assert lab.explain("p").message.endswith('could not find ResourceClaim "default/nope"')
