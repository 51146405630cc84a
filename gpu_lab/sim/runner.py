"""The simulated cluster put together, and its clock driven.

``Runner`` builds one cluster's parts (state, kubelets, binder, scheduling queue and loop,
controllers, API server) and moves the clock: at each instant the queue is run and the
controllers react until nothing changes (what a real cluster does within seconds), then
the next events on the clock happen (pods finish, objects are submitted, controllers and
Permit timers wake). The cluster's levels (nodes, GPUs, pending pods, dollars) are
reported to the ``Recorder`` whenever the clock moves.
"""

from __future__ import annotations

from ..collector import collector_paused
from ..gpus.pricing import node_price_per_hour, physical_gpus
from .apiserver import ApiServer
from .binder import Binder
from .clock import Event
from .cluster import Cluster
from .controllermanager import ControllerManager
from .kubelet import Kubelets
from .nodes import Nodes
from .predicatechecker import PredicateChecker
from .queue import SchedulingQueue
from .recorder import Levels, Recorder
from .schedulingloop import SchedulingLoop

# advance() with no limit stops here even if something keeps waking (e.g. a retry loop)
HORIZON_S = 366 * 24 * 3600.0


class Runner:
    def __init__(self, seed: int | None = 0, deterministic: bool = False, record: bool = True) -> None:
        self.cluster = c = Cluster(seed, deterministic, record)
        self.kubelets = Kubelets(c)
        self.binder = Binder(c, self.kubelets)
        self.controllers = ControllerManager(self)
        self.binder.controllers = self.controllers  # told when pods start and stop
        self.nodes = Nodes(c, self.kubelets, self.binder)
        self.predicate_checker = PredicateChecker(c)
        self.queue = SchedulingQueue(c)
        self.loop = SchedulingLoop(c, self.queue, self.binder)
        self.apiserver = ApiServer(self)
        self.recorder = Recorder()

    def run_queue(self) -> None:
        """One pass over the scheduling queue."""
        with collector_paused():
            self.loop.run()

    def settle(self) -> None:
        """Schedule, let the controllers react (replacements, new pods), repeat until quiet:
        what a real cluster does within seconds of a change, at one instant of the clock."""
        for _ in range(100_000):
            self.run_queue()
            if not self.controllers.sync():
                return

    def tick(self, seconds: float | None) -> None:
        """Run the clock ``seconds`` forward (None: until nothing is left to happen)."""
        c = self.cluster
        target = c.now + (HORIZON_S if seconds is None else seconds)
        self.settle()
        self.observe()
        while (t := c.events.next_at()) is not None and t <= target:
            c.now = max(c.now, t)
            submitted: list = []
            while (t := c.events.next_at()) is not None and t <= c.now:
                ev = c.events.pop()
                if ev.kind == "submit":
                    submitted.append(ev.payload)
                else:
                    self._handle(ev)
            if submitted:
                self.apiserver.submit(submitted)
            self.settle()
            self.observe()
        if seconds is not None:
            c.now = target
        self.kubelets.sync_expired()  # grace periods may have run out
        self.settle()
        self.observe()

    def _handle(self, ev: Event) -> None:
        if ev.kind == "finish":
            key, token = ev.payload
            rec = self.cluster.records.get(key)
            if rec is not None and rec.phase == "Running" and rec.finish_token == token:
                self.binder.end(rec, "Succeeded", "Completed")
        elif ev.kind == "wake":
            controller, key = ev.payload
            controller.wake(key)
        elif ev.kind == "rendezvous":
            self.controllers.rendezvous.wake(ev.payload, self.cluster.now)

    def observe(self) -> None:
        self.recorder.observe(self.cluster.now, self.levels())

    def levels(self) -> Levels:
        c = self.cluster
        if c.fleet is None:
            gpu_nodes = gpus = 0
            dollars = 0.0
            for n in c.nodes.values():
                g = physical_gpus(n.labels, n.capacity)
                if g or any(r.startswith("nvidia.com/") and v for r, v in n.capacity.items()):
                    gpu_nodes += 1
                gpus += g
                dollars += node_price_per_hour(n.labels, n.capacity, n.raw.get("nodePool")) or 0.0
            c.fleet = (gpu_nodes, gpus, dollars)
        gpu_nodes, gpus, dollars = c.fleet
        coming = 0
        autoscaler = self.controllers.autoscaler
        if autoscaler is not None:  # asked-for nodes are billed while they boot
            coming, extra = autoscaler.provisioning_cost()
            dollars += extra
        return Levels(len(c.nodes) + coming, gpu_nodes, gpus, c.gpus_allocated,
                      self.controllers.rendezvous.stranded_gpus, len(c.pending), round(dollars, 4))
