"""Bad Kueue objects are refused as the API server refuses them: the CRD schema and CEL rules
first (``Kind.kueue.x-k8s.io "name" is invalid``), then Kueue's webhook, every error at once."""

import pytest

from gpu_lab.errors import GpuLabError, InvalidObject
from gpu_lab.sim.kueue import Kueue, parse_kueue

from .kit import V, cluster_queue, configuration, flavor, job, local_queue, pending, submit_all

GPU = "nvidia.com/gpu"
WEBHOOK = 'admission webhook "vclusterqueue.kb.io" denied the request: '
NOT_CHECKED = ("<nil>: Invalid value: null: some validation rules were not checked because the object was "
               "invalid; correct the existing errors to complete validation")
QUANTITY = (r"'^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|"
            r"(\.[0-9]+))))?$'")
Q0 = "spec.resourceGroups[0].flavors[0].resources[0]"


def raw_cq(resources, covered=(GPU,), name="cq", **spec):
    return {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
        "resourceGroups": [{"coveredResources": list(covered),
                            "flavors": [{"name": "h100", "resources": resources}]}], **spec}}


def refusal(*docs):
    with pytest.raises(GpuLabError) as err:
        parse_kueue(list(docs))
    return str(err.value)


# -------------------------------------------------------------- quota over an uncovered resource

def test_a_flavor_quota_for_a_resource_the_group_does_not_cover_fails_the_cel_rule():
    msg = refusal(raw_cq([{"name": GPU, "nominalQuota": 8}, {"name": "cpu", "nominalQuota": 8}]))
    assert msg == ('ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec.resourceGroups[0]: Invalid value: "object": '
                   "flavors must have the same number of resources as the coveredResources")


def test_a_quota_naming_another_resource_than_covered_is_denied_by_the_webhook():
    assert refusal(raw_cq([{"name": "cpu", "nominalQuota": 8}])) == (
        WEBHOOK + f'{Q0}.name: Invalid value: "cpu": must match the name in coveredResources')


def test_a_resource_covered_twice_is_a_duplicate():
    doc = raw_cq([{"name": GPU, "nominalQuota": 8}, {"name": GPU, "nominalQuota": 8}], covered=(GPU, GPU))
    assert refusal(doc) == WEBHOOK + f'spec.resourceGroups[0].coveredResources[1]: Duplicate value: "{GPU}"'


def test_a_flavor_listed_twice_is_a_duplicate():
    doc = raw_cq([{"name": GPU, "nominalQuota": 8}])
    doc["spec"]["resourceGroups"][0]["flavors"].append(doc["spec"]["resourceGroups"][0]["flavors"][0])
    assert refusal(doc) == WEBHOOK + 'spec.resourceGroups[0].flavors[1].name: Duplicate value: "h100"'


def test_a_workload_requesting_an_uncovered_resource_waits_with_kueues_message():
    k = Kueue(parse_kueue([flavor("h100"), cluster_queue("team", [("h100", {GPU: 8})]), local_queue("q", "team")]))
    submit_all(k, job("a", 1, cpu=500))
    assert pending(k.schedule(0))["a"].endswith("resource cpu unavailable in ClusterQueue")


# -------------------------------------------------------------- quantities

def test_negative_quantities_are_denied_each_with_its_path():
    doc = raw_cq([{"name": GPU, "nominalQuota": -1}, {"name": "cpu", "nominalQuota": "-500m"}],
                 covered=(GPU, "cpu"))
    assert refusal(doc) == WEBHOOK + (
        f'[{Q0}.nominalQuota: Invalid value: "-1": must be greater than or equal to 0, '
        'spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: Invalid value: "-500m": must be greater '
        "than or equal to 0]")


def test_negative_limits_are_denied():
    doc = cluster_queue("cq", [("h100", {GPU: {"nominalQuota": 8, "borrowingLimit": "-1", "lendingLimit": -2}})],
                        cohort="lab")
    assert refusal(doc) == WEBHOOK + (
        f'[{Q0}.borrowingLimit: Invalid value: "-1": must be greater than or equal to 0, '
        f'{Q0}.lendingLimit: Invalid value: "-2": must be greater than or equal to 0]')


def test_an_unparsable_quantity_fails_the_schema_pattern():
    assert refusal(raw_cq([{"name": GPU, "nominalQuota": "eight"}])) == (
        f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: {Q0}.nominalQuota: Invalid value: "eight": '
        f"{Q0}.nominalQuota in body should match {QUANTITY}")


def test_a_fractional_yaml_number_is_not_an_int_or_string():
    msg = refusal(raw_cq([{"name": GPU, "nominalQuota": 0.5}]))
    assert msg == (f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: [{Q0}.nominalQuota: Invalid value: "number": '
                   f'{Q0}.nominalQuota in body must be of type integer,string: "number", {NOT_CHECKED}]')


def test_a_missing_nominal_quota_is_required():
    assert refusal(raw_cq([{"name": GPU}])) == (
        f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: [{Q0}.nominalQuota: Required value, {NOT_CHECKED}]')


# -------------------------------------------------------------- cohort limits

def test_a_borrowing_limit_without_a_cohort_fails_the_cel_rule():
    doc = cluster_queue("cq", [("h100", {GPU: {"nominalQuota": 8, "borrowingLimit": 2}})])
    assert refusal(doc) == ('ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec: Invalid value: "object": '
                            "borrowingLimit must be nil when cohort is empty")


def test_a_lending_limit_without_a_cohort_or_above_nominal_is_denied():
    doc = cluster_queue("cq", [("h100", {GPU: {"nominalQuota": 8, "lendingLimit": 2}})])
    assert refusal(doc) == WEBHOOK + f'{Q0}.lendingLimit: Invalid value: "2": must be nil when cohort is empty'
    doc = cluster_queue("cq", [("h100", {GPU: {"nominalQuota": 8, "lendingLimit": 10}})], cohort="lab")
    assert refusal(doc) == WEBHOOK + (
        f'{Q0}.lendingLimit: Invalid value: "10": must be less than or equal to the nominalQuota')


# -------------------------------------------------------------- enums, names, selectors

def test_an_unknown_queueing_strategy_lists_the_supported_ones_and_skips_cel():
    doc = cluster_queue("cq", [("h100", {GPU: 8})], strategy="FIFO")
    assert refusal(doc) == ('ClusterQueue.kueue.x-k8s.io "cq" is invalid: [spec.queueingStrategy: Unsupported '
                            f'value: "FIFO": supported values: "StrictFIFO", "BestEffortFIFO", {NOT_CHECKED}]')


def test_an_unknown_preemption_policy():
    doc = cluster_queue("cq", [("h100", {GPU: 8})], preemption={"withinClusterQueue": "Always"})
    assert 'spec.preemption.withinClusterQueue: Unsupported value: "Always": supported values: "Never", ' \
           '"LowerPriority", "LowerOrNewerEqualPriority"' in refusal(doc)


def test_a_bad_name_and_a_bad_flavor_reference_together():
    doc = cluster_queue("Team_A", [("H100", {GPU: 8})])
    msg = refusal(doc)
    assert msg.startswith('ClusterQueue.kueue.x-k8s.io "Team_A" is invalid: [metadata.name: Invalid value: "Team_A"')
    assert 'spec.resourceGroups[0].flavors[0].name: Invalid value: "H100"' in msg


def test_a_bad_namespace_selector_operator_is_denied():
    doc = cluster_queue("cq", [("h100", {GPU: 8})],
                        selector={"matchExpressions": [{"key": "team", "operator": "Among", "values": ["a"]}]})
    assert refusal(doc) == WEBHOOK + ('spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "Among": '
                                      "not a valid selector operator")


# -------------------------------------------------------------- other kinds

def test_a_flavor_taint_with_an_unknown_effect_fails_the_cel_rule():
    assert refusal(flavor("h100", taints=[{"key": "gpu", "value": "true", "effect": "NoRun"}])) == (
        'ResourceFlavor.kueue.x-k8s.io "h100" is invalid: spec.nodeTaints: Invalid value: "array": '
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'")


def test_duplicate_flavor_taints_are_denied_by_the_flavor_webhook():
    doc = flavor("h100", taints=[{"key": "gpu", "effect": "NoSchedule"},
                                 {"key": "gpu", "value": "x", "effect": "NoSchedule"}])
    assert refusal(doc) == ('admission webhook "vresourceflavor.kb.io" denied the request: spec.nodeTaints[1]: '
                            'Duplicate value: {"key":"gpu","value":"x","effect":"NoSchedule"}: taints must be '
                            "unique by key and effect pair")


def test_flavor_node_labels_are_validated_as_labels():
    msg = refusal(flavor("h100", {"gpu model": "h100"}))
    assert msg.startswith('admission webhook "vresourceflavor.kb.io" denied the request: spec.nodeLabels: '
                          'Invalid value: "gpu model": name part must consist of alphanumeric characters')


def test_a_local_queue_naming_a_missing_cluster_queue_is_accepted():
    cfg = parse_kueue([local_queue("q", "missing")])
    assert cfg.local_queues["default/q"].cluster_queue == "missing"


def test_a_local_queue_with_an_invalid_cluster_queue_reference_is_refused():
    assert refusal(local_queue("q", "Team_A")) == (
        'LocalQueue.kueue.x-k8s.io "q" is invalid: spec.clusterQueue: Invalid value: "Team_A": spec.clusterQueue '
        "in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'")


def test_a_priority_class_needs_a_value():
    doc = {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}}
    assert refusal(doc) == 'WorkloadPriorityClass.kueue.x-k8s.io "high" is invalid: value: Required value'


def test_a_second_object_of_the_same_name_already_exists():
    assert refusal(flavor("h100"), flavor("h100")) == 'resourceflavors.kueue.x-k8s.io "h100" already exists'


def test_an_unserved_version_and_an_unmodelled_kind():
    assert refusal({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "x"}}) \
        == 'no matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1alpha1"'
    assert refusal({"apiVersion": V, "kind": "Cohort", "metadata": {"name": "x"}}).startswith(
        "Cohort: the sim's Kueue model does not cover Cohort objects")


def test_errors_are_invalid_object_for_the_schema_and_one_line():
    with pytest.raises(InvalidObject) as err:
        parse_kueue([raw_cq([{"name": GPU, "nominalQuota": "eight"}])])
    assert err.value.kind == "ClusterQueue.kueue.x-k8s.io" and "\n" not in str(err.value)


# -------------------------------------------------------------- the manager's Configuration

@pytest.mark.parametrize(("pods_ready", "expected"), [
    ({}, "waitForPodsReady.timeout: Required value: must be specified"),
    ({"timeout": "five minutes"}, 'time: invalid duration "five minutes"'),
    ({"timeout": "300"}, 'time: missing unit in duration "300"'),
    ({"timeout": "5m", "recoveryTimeout": "-1s"},
     'waitForPodsReady.recoveryTimeout: Invalid value: "-1s": must be greater than or equal to 0'),
    ({"timeout": "5m", "requeuingStrategy": {"timestamp": "Now"}},
     'waitForPodsReady.requeuingStrategy.timestamp: Unsupported value: "Now": supported values: "Creation", '
     '"Eviction"'),
    ({"timeout": "5m", "requeuingStrategy": {"backoffLimitCount": -1}},
     "waitForPodsReady.requeuingStrategy.backoffLimitCount: Invalid value: -1: must be greater than or equal to 0"),
    ({"timeout": "5m", "enable": True}, 'strict decoding error: unknown field "waitForPodsReady.enable"'),
])
def test_a_bad_configuration_fails_as_the_manager_fails_to_start(pods_ready, expected):
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": pods_ready}
    assert refusal(doc) == f"Unable to load the configuration: {expected}"


def test_a_negative_timeout_reports_it_and_the_recovery_timeout_it_defaults():
    assert refusal(configuration(timeout="-1m")) == (
        "Unable to load the configuration: [waitForPodsReady.timeout: Invalid value: \"-1m0s\": must be greater "
        "than or equal to 0, waitForPodsReady.recoveryTimeout: Invalid value: \"-1m0s\": must be greater than or "
        "equal to 0]")


def test_an_unknown_workload_priority_class_label_fails_like_kueues_get():
    from gpu_lab.sim.kueue import job_workload
    manifest = {"metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q",
                                                    "kueue.x-k8s.io/priority-class": "nope"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    with pytest.raises(GpuLabError, match='workloadpriorityclasses.kueue.x-k8s.io "nope" not found'):
        job_workload(manifest, config=parse_kueue([flavor("h100")]))
