"""The Autoscaler object: cluster-autoscaler's flag defaults, Karpenter's, and every bad input in one line."""

import pytest

from gpu_lab.errors import GpuLabError, InvalidObject
from gpu_lab.model.autoscaler import SPEC_FIELDS
from gpu_lab.sim.autoscaler import AutoscalerSpec, parse_autoscaler


def doc(name="default", **spec):
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler", "metadata": {"name": name}, "spec": spec}


def error(d) -> str:
    with pytest.raises(GpuLabError) as exc:
        parse_autoscaler(d)
    return str(exc.value)


# -- defaults ---------------------------------------------------------------------------------


def test_defaults_are_cluster_autoscalers():
    spec = parse_autoscaler(doc())
    assert spec == AutoscalerSpec(name="default")
    assert spec.mode == "ClusterAutoscaler"
    assert spec.scale_down_unneeded_time == 600  # --scale-down-unneeded-time 10m0s
    assert spec.scale_down_utilization_threshold == 0.5
    assert spec.scale_down_gpu_utilization_threshold == 0.5
    assert spec.scale_down_delay_after_add == 600
    assert spec.scale_down_delay_after_delete == 0
    assert spec.expander == ("least-waste",)
    assert spec.max_scale_down_parallelism == 10 and spec.max_drain_parallelism == 1
    assert spec.scan_interval == 10
    assert spec.max_nodes_total == 0
    assert spec.skip_nodes_with_system_pods and spec.skip_nodes_with_custom_controller_pods
    assert not spec.ignore_daemonsets_utilization


def test_karpenter_defaults():
    spec = parse_autoscaler(doc(mode="Consolidation"))
    assert spec.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert spec.consolidate_after == 0
    assert spec.budgets == ("10%",)


def test_no_spec_at_all_is_the_defaults():
    d = doc()
    del d["spec"]
    assert parse_autoscaler(d) == AutoscalerSpec()


# -- every field ------------------------------------------------------------------------------


def test_cluster_autoscaler_fields():
    spec = parse_autoscaler(doc(
        name="ca", scaleDownEnabled=False, scaleDownUnneededTime="2m", scaleDownUtilizationThreshold=0.7,
        scaleDownGpuUtilizationThreshold=0.25, scaleDownDelayAfterAdd="0s", scaleDownDelayAfterDelete="30s",
        expander="priority,least-waste", priorities={50: ["^h100$"], 10: [".*"]}, maxNodesTotal=20,
        maxScaleDownParallelism=3, maxDrainParallelism=2, ignoreDaemonsetsUtilization=True,
        skipNodesWithSystemPods=False, skipNodesWithCustomControllerPods=False, scanInterval="1m"))
    assert spec == AutoscalerSpec(
        name="ca", scale_down_enabled=False, scale_down_unneeded_time=120, scale_down_utilization_threshold=0.7,
        scale_down_gpu_utilization_threshold=0.25, scale_down_delay_after_add=0, scale_down_delay_after_delete=30,
        expander=("priority", "least-waste"), priorities={50: ("^h100$",), 10: (".*",)}, max_nodes_total=20,
        max_scale_down_parallelism=3, max_drain_parallelism=2, ignore_daemonsets_utilization=True,
        skip_nodes_with_system_pods=False, skip_nodes_with_custom_controller_pods=False, scan_interval=60)


def test_consolidation_fields():
    spec = parse_autoscaler(doc(mode="Consolidation", consolidationPolicy="WhenEmpty", consolidateAfter="1h",
                                budgets=[{"nodes": "20%"}, {"nodes": "5"}]))
    assert (spec.consolidation_policy, spec.consolidate_after, spec.budgets) == ("WhenEmpty", 3600, ("20%", "5"))
    assert parse_autoscaler(doc(mode="Consolidation", consolidateAfter="Never")).consolidate_after is None


def test_priorities_keys_may_be_strings_and_patterns_one_string():
    spec = parse_autoscaler(doc(expander="priority", priorities={"20": "h100"}))
    assert spec.priorities == {20: ("h100",)}


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"mode": "Karpenter"},
         'spec.mode: Unsupported value: "Karpenter": supported values: "ClusterAutoscaler", "Consolidation"'),
        ({"scaleDownUnneededTime": "ten minutes"},
         'spec.scaleDownUnneededTime: Invalid value: "ten minutes": must be a duration such as 90s, 5m or 1h30m'),
        ({"scaleDownDelayAfterAdd": "-1m"},
         'spec.scaleDownDelayAfterAdd: Invalid value: "-1m": must be greater than or equal to 0'),
        ({"scaleDownDelayAfterDelete": 30},
         "spec.scaleDownDelayAfterDelete: Invalid value: 30: must be a duration string such as 90s, 5m or 1h30m"),
        ({"scanInterval": "0s"}, 'spec.scanInterval: Invalid value: "0s": must be greater than 0'),
        ({"scaleDownUtilizationThreshold": 1.5},
         "spec.scaleDownUtilizationThreshold: Invalid value: 1.5: must be between 0 and 1"),
        ({"scaleDownGpuUtilizationThreshold": "half"},
         "spec.scaleDownGpuUtilizationThreshold: Invalid value: 'half': must be a number between 0 and 1"),
        ({"scaleDownEnabled": "yes"}, "spec.scaleDownEnabled: Invalid value: 'yes': must be true or false"),
        ({"expander": "cheapest"},
         'spec.expander: Unsupported value: "cheapest": supported values: "random", "most-pods", "least-waste", '
         '"least-nodes", "price", "priority"'),
        ({"expander": "grpc"},
         'spec.expander: Unsupported value: "grpc": the grpc expander calls an external server gpu-lab does '
         'not run; supported values: "random", "most-pods", "least-waste", "least-nodes", "price", "priority"'),
        ({"expander": "price,least-waste,price"},
         'spec.expander: Duplicate value: "price": an expander must not appear in the list more than once'),
        ({"expander": "priority"},
         "spec.priorities: Required value: the priority expander reads its priorities (the "
         "cluster-autoscaler-priority-expander ConfigMap's data)"),
        ({"expander": "priority", "priorities": {10: ["(unclosed"]}},
         'spec.priorities: [10]: Invalid value: "(unclosed": not a regular expression: missing ), unterminated '
         "subpattern at position 0"),
        ({"priorities": {"high": [".*"]}}, "spec.priorities: Invalid value: 'high': priorities must be integers"),
        ({"priorities": {-1: [".*"]}}, "spec.priorities: Invalid value: -1: priorities must be non-negative integers"),
        ({"maxNodesTotal": -5}, "spec.maxNodesTotal: Invalid value: -5: must be greater than or equal to 0"),
        ({"maxDrainParallelism": 0}, "spec.maxDrainParallelism: Invalid value: 0: must be greater than 0"),
        ({"maxScaleDownParallelism": 2.5}, "spec.maxScaleDownParallelism: Invalid value: 2.5: must be an integer"),
        ({"scaleDownUnneededTiem": "5m"},
         "spec.scaleDownUnneededTiem: unknown field (known: " + ", ".join(SPEC_FIELDS) + ")"),
        ({"consolidationPolicy": "WhenEmpty"},
         "spec.consolidationPolicy: Forbidden: only with mode Consolidation (mode is ClusterAutoscaler)"),
        ({"mode": "Consolidation", "scaleDownUnneededTime": "5m"},
         "spec.scaleDownUnneededTime: Forbidden: only with mode ClusterAutoscaler (mode is Consolidation)"),
        ({"mode": "Consolidation", "consolidationPolicy": "Always"},
         'spec.consolidationPolicy: Unsupported value: "Always": supported values: "WhenEmpty", '
         '"WhenEmptyOrUnderutilized"'),
        ({"mode": "Consolidation", "consolidateAfter": "soon"},
         'spec.consolidateAfter: Invalid value: "soon": must be a duration such as 90s, 5m or 1h30m, or "Never"'),
        ({"mode": "Consolidation", "budgets": [{"nodes": "110%"}]},
         "spec.budgets: [0].nodes: Invalid value: \"110%\": should match '^((100|[0-9]{1,2})%|[0-9]+)$'"),
        ({"mode": "Consolidation", "budgets": [{"nodes": "10%", "schedule": "@daily"}]},
         "spec.budgets: [0].schedule: unknown field (gpu-lab models budgets by nodes only)"),
        ({"mode": "Consolidation", "budgets": []}, 'spec.budgets: must be a list of budgets such as [{nodes: "10%"}]'),
    ],
)
def test_bad_autoscaler(spec, message):
    assert error(doc(**spec)) == f'Autoscaler "default" is invalid: {message}'


def test_every_error_at_once_in_field_order():
    with pytest.raises(InvalidObject) as exc:
        parse_autoscaler(doc(bogus=1, scaleDownUtilizationThreshold=2, expander="best", consolidateAfter="1m"))
    assert exc.value.errors == [
        "spec.bogus: unknown field (known: " + ", ".join(SPEC_FIELDS) + ")",
        "spec.scaleDownUtilizationThreshold: Invalid value: 2: must be between 0 and 1",
        'spec.expander: Unsupported value: "best": supported values: "random", "most-pods", "least-waste", '
        '"least-nodes", "price", "priority"',
        "spec.consolidateAfter: Forbidden: only with mode Consolidation (mode is ClusterAutoscaler)",
    ]
    assert str(exc.value).startswith('Autoscaler "default" is invalid: [spec.bogus: unknown field')
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ([], "Autoscaler: the document must be a mapping"),
        ({"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler"}, "Autoscaler: metadata.name: Required value"),
        ({"apiVersion": "autoscaling/v1", "kind": "Autoscaler", "metadata": {"name": "x"}},
         'Autoscaler "x": apiVersion/kind must be gpulab.dev/v1alpha1/Autoscaler, got autoscaling/v1/Autoscaler'),
        ({"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler", "metadata": {"name": "x"}, "spec": [1]},
         'Autoscaler "x" is invalid: spec: must be a mapping'),
    ],
)
def test_bad_documents(d, message):
    assert error(d) == message
