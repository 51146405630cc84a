"""Prices, node-hours and dollars; and the adapter from gpu-lab's NodePool, Node and Pod records."""

import copy

import pytest
import yaml
from scalekit import downs, removed, scaler
from simkit import pod as sim_pod

from gpu_lab.gpus.catalog import get_model
from gpu_lab.model.nodepool import node_pool
from gpu_lab.sim.autoscaler import (
    Cost,
    NodeLifetime,
    node_cost,
    node_group,
    node_state,
    pod_state,
    pool_price_per_hour,
    utilization,
)

POOLS = yaml.safe_load_all("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  autoscaling: {minCount: 0, maxCount: 4}
  gpu: {model: H100-80GB, count: 8}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec:
  count: 1
  cpu: "16"
  memory: 64Gi
  pricePerHour: 0.68
""")
H100_DOC, CPU_DOC = list(POOLS)


# -- prices -----------------------------------------------------------------------------------


def test_catalog_price_is_gpus_times_per_gpu_price():
    assert pool_price_per_hour(H100_DOC) == pytest.approx(8 * get_model("H100-80GB").price_per_hour)


def test_price_per_hour_wins():
    assert pool_price_per_hour(CPU_DOC) == 0.68
    doc = copy.deepcopy(H100_DOC)
    doc["spec"]["pricePerHour"] = 40
    assert pool_price_per_hour(doc) == 40.0


def test_cpu_pool_without_a_price_costs_nothing():
    doc = copy.deepcopy(CPU_DOC)
    del doc["spec"]["pricePerHour"]
    assert pool_price_per_hour(doc) == 0.0


# -- node-hours and dollars -------------------------------------------------------------------


def test_node_hours_and_dollars():
    lives = [NodeLifetime("h100-0", "h100", 0, 7200), NodeLifetime("h100-1", "h100", 1800, None),
             NodeLifetime("cpu-0", "cpu", 0, None)]
    cost = node_cost(lives, {"h100": 50.0, "cpu": 1.0}, until=3600)
    assert cost == Cost(node_hours=2.5, cost_usd=1.5 * 50 + 1.0, by_pool={"cpu": (1.0, 1.0), "h100": (1.5, 75.0)})


def test_lives_starting_after_until_count_nothing_and_prices_may_be_a_function():
    cost = node_cost([NodeLifetime("h100-3", "h100", 5000, None)], lambda pool: 10.0, until=3600)
    assert (cost.node_hours, cost.cost_usd) == (0, 0)


def test_unpriced_pools_are_named():
    cost = node_cost([NodeLifetime("x-0", "x", 0, 3600)], {"x": None}, until=3600)
    assert (cost.node_hours, cost.cost_usd, cost.unpriced) == (1.0, 0.0, ("x",))


def test_spreading_costs_more_node_hours_than_packing():
    # the comparison the lesson makes: the same 2 GPU-pods on two nodes or one, for a day
    price = {"h100": pool_price_per_hour(H100_DOC)}
    spread = node_cost([NodeLifetime("h100-0", "h100", 0), NodeLifetime("h100-1", "h100", 0)], price, 86400)
    packed = node_cost([NodeLifetime("h100-0", "h100", 0)], price, 86400)
    assert spread.node_hours == 48 and packed.node_hours == 24
    assert spread.cost_usd == pytest.approx(2 * packed.cost_usd)


# -- the adapter ------------------------------------------------------------------------------


def test_node_group_from_a_node_pool():
    g = node_group(H100_DOC)
    assert (g.name, g.min_count, g.max_count, g.provisioning_delay) == ("h100", 0, 4, 300.0)
    assert g.allocatable["nvidia.com/gpu"] == 8 and g.allocatable["cpu"] == 192_000
    assert g.is_gpu_node
    assert g.price_per_hour == pool_price_per_hour(H100_DOC)
    assert g.template.name == "h100-template"
    assert g.template.labels["kubernetes.io/hostname"] == "h100-template"
    assert node_group(CPU_DOC) is None  # no spec.autoscaling


def test_node_state_and_pod_state_from_gpu_lab_records():
    pool = node_pool(H100_DOC)
    n = pool.node(0)
    p = sim_pod("train-0", cpu_m=1000, gpus=1)
    p.owner_kind = "Job"
    state = node_state(n, [p], created_at=120)
    assert (state.name, state.pool, state.created_at, state.is_gpu_node) == ("h100-0", "h100", 120, True)
    assert state.gpu_requested == 1 and state.gpu_allocatable == 8
    assert state.pods[0].ref is p and state.ref is n
    assert pod_state(p).key == "default/train-0" and pod_state(p).owner_kind == "Job"


def test_mig_mixed_node_is_a_gpu_node_at_zero():
    doc = copy.deepcopy(H100_DOC)
    doc["spec"].update(devicePlugin={"flags": {"migStrategy": "mixed"}}, mig={"config": "all-balanced"})
    n = node_pool(doc).node(0)
    assert n.allocatable.get("nvidia.com/gpu", 0) == 0
    busy = sim_pod("infer", cpu_m=1000)
    state = node_state(n, [busy])
    assert state.is_gpu_node
    assert utilization(state).value == 0.0  # CA sees no nvidia.com/gpu: the node looks idle


def test_the_lesson_end_to_end_on_pool_nodes():
    groups = [node_group(H100_DOC)]
    s = scaler(*groups)
    pool = node_pool(H100_DOC)
    web = sim_pod("web", cpu_m=500)
    web.owner_kind = "ReplicaSet"
    cpu = node_pool(CPU_DOC).node(0)
    nodes = [node_state(pool.node(0), [web]), node_state(cpu, [])]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]
    bare = sim_pod("debug", cpu_m=500)  # no owner: kubectl run
    stuck = [node_state(pool.node(1), [bare]), node_state(cpu, [])]
    s.reconcile(700, stuck)
    assert downs(s.reconcile(5000, stuck)) == []
    assert s.status()["h100-1"].message == "Node h100-1 cannot be removed: default/debug is not replicated"
