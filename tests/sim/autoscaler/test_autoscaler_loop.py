"""The model driven by a toy engine, as the simulator will drive it: a day in node-hours and dollars."""

import heapq

from scalekit import gpu_group, pod, scaler

from gpu_lab.sim.autoscaler import NodeLifetime, NodeState, ScaleDown, ScaleUp, node_cost
from gpu_lab.sim.autoscaler.estimator import shortfall


class ToyEngine:
    """Just enough of a cluster: first-fit binding, pods that run for a while, nodes that come and go."""

    def __init__(self, autoscaler, groups):
        self.scaler = autoscaler
        self.groups = {g.name: g for g in groups}
        self.nodes: dict[str, NodeState] = {}
        self.pending = []
        self.timers = []  # (at, seq, kind, payload)
        self.lives: dict[str, NodeLifetime] = {}
        self.removed = []
        self._seq = 0

    def at(self, t, kind, payload):
        self._seq += 1
        heapq.heappush(self.timers, (t, self._seq, kind, payload))

    def submit(self, t, p, runs_for):
        self.at(t, "submit", (p, runs_for))

    def bind(self, now):
        for p in list(self.pending):
            for n in self.nodes.values():
                free = {r: a - n.requested(r) for r, a in n.allocatable.items() if r != "pods"}
                if shortfall(p.requests, free) is None:
                    n.pods.append(p)
                    self.pending.remove(p)
                    self.at(now + p.runs_for, "finish", (n.name, p))
                    break

    def run(self, until):
        now = 0.0
        while True:
            wake = self.scaler.next_wakeup()
            times = [t for t, *_ in self.timers[:1]] + ([wake] if wake is not None else [])
            if not times or min(times) > until:
                return until
            now = min(times)
            while self.timers and self.timers[0][0] == now:
                _, _, kind, payload = heapq.heappop(self.timers)
                if kind == "submit":
                    p, runs_for = payload
                    p.runs_for = runs_for
                    self.pending.append(p)
                elif kind == "finish":
                    name, p = payload
                    if name in self.nodes and p in self.nodes[name].pods:
                        self.nodes[name].pods.remove(p)
                elif kind == "ready":
                    name, pool = payload
                    g = self.groups[pool]
                    self.nodes[name] = NodeState(name, pool, dict(g.allocatable), [], now)
            self.bind(now)
            for a in self.scaler.reconcile(now, list(self.nodes.values()), list(self.pending)):
                if isinstance(a, ScaleUp):
                    for name in a.nodes:
                        self.lives[name] = NodeLifetime(name, a.pool, now)
                        self.at(a.ready_at, "ready", (name, a.pool))
                elif isinstance(a, ScaleDown):
                    node = self.nodes.pop(a.node)
                    self.pending += node.pods
                    self.lives[a.node] = NodeLifetime(a.node, a.pool, self.lives[a.node].start, now)
                    self.removed.append((now, a.node))
            self.bind(now)


H100 = gpu_group("h100", price=55.0)


def test_three_training_pods_one_hour():
    engine = ToyEngine(scaler(H100), [H100])
    for i in range(3):
        engine.submit(0, pod(f"train-{i}", gpus=8, owner="Job"), 3600)
    until = engine.run(86400)
    # requested at 0, Ready at 300, pods done at 3900, unneeded for 10 minutes: gone at 4500
    assert engine.removed == [(4500, "h100-0"), (4500, "h100-1"), (4500, "h100-2")]
    cost = node_cost(engine.lives.values(), {"h100": 55.0}, until)
    assert cost.node_hours == 3 * 4500 / 3600
    assert cost.cost_usd == 3 * 4500 / 3600 * 55.0


def test_a_bare_pod_keeps_a_gpu_node_all_day():
    engine = ToyEngine(scaler(H100), [H100])
    engine.submit(0, pod("train-0", gpus=8, owner="Job"), 3600)
    engine.submit(1000, pod("debug", cpu_m=100, owner=None), 86400)  # kubectl run, lands on the GPU node
    until = engine.run(86400)
    assert engine.removed == []
    assert node_cost(engine.lives.values(), {"h100": 55.0}, until).node_hours == 24
    assert engine.scaler.status()["h100-0"].message == (
        "Node h100-0 cannot be removed: default/debug is not replicated")


def test_a_second_wave_reuses_no_names():
    engine = ToyEngine(scaler(H100), [H100])
    engine.submit(0, pod("a", gpus=8, owner="Job"), 600)
    engine.submit(7200, pod("b", gpus=8, owner="Job"), 600)
    engine.run(86400)
    assert engine.removed == [(1500, "h100-0"), (8700, "h100-1")]
