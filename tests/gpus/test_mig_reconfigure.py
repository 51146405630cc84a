"""MIG reconfiguration through nvidia.com/mig.config, as the GPU Operator's MIG manager does it."""

import copy

import pytest
import yaml

from gpu_lab.errors import GpuLabError
from gpu_lab.kubelet.reconfigure import STATES, reconfigure
from gpu_lab.model.nodepool import expand_node_pool, node_from_manifest

POOL = yaml.safe_load("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 2}
  cpu: "96"
  memory: 1024Gi
  labels: {team: research}
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  devicePlugin: {version: v1, flags: {migStrategy: mixed}}
  mig: {config: all-balanced}
""")


def node(**spec):
    doc = copy.deepcopy(POOL)
    doc["spec"].update(spec)
    return expand_node_pool(doc)[0]


def gpu_resources(n, field="capacity"):
    return {r: q for r, q in getattr(n, field).items() if r.startswith("nvidia.com/")}


def test_states_are_the_mig_managers():
    assert STATES == ("pending", "rebooting", "success", "failed")


def test_reconfigure_to_all_disabled_leaves_stale_names_at_zero():
    before = node()
    snapshot = copy.deepcopy(before)
    result = reconfigure(before, "all-disabled", pods_holding=[], evict=False)
    after = result.node
    assert result.state == "success" and result.steps == ("pending", "success") and result.changed
    assert result.evicted == ()
    assert gpu_resources(after) == {"nvidia.com/mig-3g.40gb": 0, "nvidia.com/mig-2g.20gb": 0,
                                    "nvidia.com/mig-1g.10gb": 0, "nvidia.com/gpu": 2}
    assert gpu_resources(after, "allocatable") == gpu_resources(after)
    assert list(after.devices) == ["nvidia.com/gpu"]
    assert after.labels["nvidia.com/mig.config"] == "all-disabled"
    assert after.labels["nvidia.com/mig.config.state"] == "success"
    assert not any(k.startswith("nvidia.com/mig-") for k in after.labels)
    assert after.labels["nvidia.com/gpu.replicas"] == "1"  # whole GPUs again
    assert after.labels["team"] == "research" and after.taints == before.taints
    assert after.capacity["cpu"] == before.capacity["cpu"]
    assert before.labels == snapshot.labels and before.capacity == snapshot.capacity  # pure function
    assert before.devices == snapshot.devices
    assert result.message == ('MIG config "all-balanced" (nvidia.com/mig-3g.40gb: 2, nvidia.com/mig-2g.20gb: 2, '
                              'nvidia.com/mig-1g.10gb: 4) -> MIG config "all-disabled": nvidia.com/gpu: 2')


def test_refused_while_pods_hold_the_gpus():
    n = node()
    with pytest.raises(GpuLabError) as exc:
        reconfigure(n, "all-1g.10gb", pods_holding=["default/infer-0", "ml/train-1"], evict=False)
    assert str(exc.value) == ('node "h100-0": cannot change MIG config to "all-1g.10gb" while pods hold its GPUs: '
                              "default/infer-0, ml/train-1 (evict them first, or pass evict=True)")
    assert n.labels["nvidia.com/mig.config"] == "all-balanced"


def test_eviction_then_new_layout():
    result = reconfigure(node(), "all-1g.10gb", pods_holding=["default/infer-0", "default/infer-0"], evict=True)
    assert result.evicted == ("default/infer-0",)
    assert gpu_resources(result.node) == {"nvidia.com/mig-3g.40gb": 0, "nvidia.com/mig-2g.20gb": 0,
                                          "nvidia.com/mig-1g.10gb": 14}
    assert len(result.node.devices["nvidia.com/mig-1g.10gb"]) == 14
    assert result.node.raw["nodePool"]["mig"]["config"] == "all-1g.10gb"
    # and back: the same layout gets the same device IDs
    back = reconfigure(result.node, "all-balanced", pods_holding=[], evict=False).node
    assert back.devices == node().devices


def test_already_applied_config_changes_nothing_even_with_pods():
    n = node()
    result = reconfigure(n, "all-balanced", pods_holding=["default/a"], evict=False)
    assert result.state == "success" and result.steps == ("success",) and not result.changed
    assert result.evicted == () and result.node.devices == n.devices
    assert result.message == 'MIG config "all-balanced" is already applied'


def test_unknown_config_fails_and_keeps_the_gpus():
    n = node()
    result = reconfigure(n, "all-2g.10gb", pods_holding=["default/a"], evict=False)
    assert result.state == "failed" and result.steps == ("failed",)
    assert result.node.labels["nvidia.com/mig.config"] == "all-2g.10gb"
    assert result.node.labels["nvidia.com/mig.config.state"] == "failed"
    assert result.node.capacity == n.capacity and result.node.devices == n.devices
    assert result.message.startswith('MIG config "all-2g.10gb" cannot be applied: unknown MIG config "all-2g.10gb" '
                                     "for H100-80GB (known: all-disabled,")


def test_mode_change_goes_through_rebooting_when_the_node_must_reboot():
    n = node(mig={"config": "all-disabled"})
    assert reconfigure(n, "all-7g.80gb", pods_holding=[], evict=False, reboot=True).steps == (
        "pending", "rebooting", "success")
    # no MIG mode change (layout to layout): no reboot needed
    assert reconfigure(node(), "all-7g.80gb", pods_holding=[], evict=False, reboot=True).steps == (
        "pending", "success")


def test_single_strategy_with_several_profiles_shows_mig_invalid():
    n = node(devicePlugin={"flags": {"migStrategy": "single"}}, mig={"config": "all-1g.10gb"})
    assert gpu_resources(n) == {"nvidia.com/gpu": 14}
    result = reconfigure(n, "all-balanced", pods_holding=[], evict=False)
    assert result.state == "success"  # the MIG manager did its job; the plugin is what refuses
    assert gpu_resources(result.node) == {"nvidia.com/gpu": 0}
    assert result.node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert result.warnings and "more than one MIG device type present on node" in result.warnings[0]
    assert result.node.raw["warnings"] == list(result.warnings)


def test_custom_mig_parted_file_of_the_pool_is_used():
    parted = {"version": "v1", "mig-configs": {
        "a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
        "b": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 1}}]}}
    n = node(mig={"config": "a", "migParted": parted})
    result = reconfigure(n, "b", pods_holding=[], evict=False)
    assert gpu_resources(result.node) == {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-4g.40gb": 2}


def test_plain_nodes_cannot_be_reconfigured():
    plain = node_from_manifest({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    with pytest.raises(GpuLabError, match='node "n1": MIG reconfiguration needs a node made by a NodePool'):
        reconfigure(plain, "all-disabled", pods_holding=[], evict=False)


def test_pool_without_mig_section_can_be_given_one():
    doc = copy.deepcopy(POOL)
    del doc["spec"]["mig"]
    n = expand_node_pool(doc)[0]
    assert gpu_resources(n) == {"nvidia.com/gpu": 2} and "nvidia.com/mig.config" not in n.labels
    result = reconfigure(n, "all-3g.40gb", pods_holding=[], evict=False)
    assert gpu_resources(result.node) == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 4}
    assert result.node.labels["nvidia.com/mig.config.state"] == "success"


def test_gpus_without_mig_and_cpu_nodes_are_refused():
    doc = copy.deepcopy(POOL)
    del doc["spec"]["mig"]
    doc["spec"]["gpu"] = {"model": "L4", "count": 1}
    with pytest.raises(GpuLabError) as exc:
        reconfigure(expand_node_pool(doc)[0], "all-disabled", pods_holding=[], evict=False)
    assert str(exc.value) == ('node "h100-0": L4 GPUs do not support MIG; the GPU Operator runs no MIG manager '
                              "there, so nvidia.com/mig.config has no effect")
    doc["spec"]["gpu"] = None
    with pytest.raises(GpuLabError, match='node "h100-0": has no GPUs'):
        reconfigure(expand_node_pool(doc)[0], "all-disabled", pods_holding=[], evict=False)


def test_invalid_layout_in_the_pools_file_fails():
    parted = {"version": "v1", "mig-configs": {
        "ok": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
        "bad": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]}}
    result = reconfigure(node(mig={"config": "ok", "migParted": parted}), "bad", pods_holding=[], evict=False)
    assert result.state == "failed"
    assert result.message == ('MIG config "bad" cannot be applied: mig-configs.bad[0].mig-devices: only one 4g.40gb '
                              "fits on an H100-80GB (max 1 instance: it can only start at memory slice 0); asked for 2")
