"""Declared GPU use: gpulab.dev/gpu-utilization and gpulab.dev/gpu-memory, and their errors."""

import math

import pytest

from gpu_lab.errors import InvalidObject
from gpu_lab.metrics import MEMORY_ANNOTATION, UTILIZATION_ANNOTATION, GpuUse, declared


def test_both_annotations_parse_to_percent_and_mib():
    d = declared({UTILIZATION_ANNOTATION: "35", MEMORY_ANNOTATION: "12Gi"}, pod="chat")
    assert d.utilization == 35.0 and d.memory_mib == 12 * 1024
    assert declared({UTILIZATION_ANNOTATION: "0", MEMORY_ANNOTATION: "500Mi"}, pod="x").memory_mib == 500
    assert declared({UTILIZATION_ANNOTATION: "100", MEMORY_ANNOTATION: "16G"}, pod="x").memory_mib == \
        pytest.approx(16e9 / 2**20)
    assert declared({UTILIZATION_ANNOTATION: "12.5"}, pod="x").utilization == 12.5


def test_absent_means_unknown_not_zero():
    d = declared({}, pod="x")
    assert d.utilization is None and d.memory_mib is None
    assert declared(None, pod="x") == d
    use = GpuUse.from_annotations({"other": "1"}, namespace="default", pod="p", container="c", node="n",
                                  model="L4", gpu=0, device_id="GPU-1")
    assert use.utilization is None and use.memory_mib is None


@pytest.mark.parametrize("value", ["150", "-5", "35%", "abc", "", "nan", "1e2", True])
def test_bad_utilization_is_one_line_naming_pod_and_annotation(value):
    with pytest.raises(InvalidObject) as err:
        declared({UTILIZATION_ANNOTATION: value}, pod="chat", namespace="team-a")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith('Pod "team-a/chat" is invalid: metadata.annotations[gpulab.dev/gpu-utilization]: '
                          f'Invalid value: "{value}"')
    assert msg.endswith("must be a number from 0 to 100")


@pytest.mark.parametrize("value", ["12GB", "lots", "-1Gi"])
def test_bad_memory_is_one_line_in_the_api_servers_words(value):
    with pytest.raises(InvalidObject) as err:
        declared({MEMORY_ANNOTATION: value}, pod="chat")
    msg = str(err.value)
    assert msg.startswith('Pod "chat" is invalid: metadata.annotations[gpulab.dev/gpu-memory]: '
                          f'Invalid value: "{value}": ')
    assert "\n" not in msg
    if value != "-1Gi":
        assert "quantities must match the regular expression" in msg
    else:
        assert msg.endswith("must be greater than or equal to 0")


def test_from_annotations_validates_with_the_pod_named():
    with pytest.raises(InvalidObject, match=r'Pod "infer-3" is invalid: .*gpu-utilization'):
        GpuUse.from_annotations({UTILIZATION_ANNOTATION: "101"}, namespace="default", pod="infer-3",
                                container="c", node="n", model="L4", gpu=0, device_id="GPU-1")
    assert not math.isnan(GpuUse.from_annotations(
        {UTILIZATION_ANNOTATION: "7"}, namespace="default", pod="p", container="c", node="n", model="L4",
        gpu=0, device_id="GPU-1").utilization)
