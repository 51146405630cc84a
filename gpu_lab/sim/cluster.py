"""The simulated cluster's state: its objects, each pod's record, and the indexes read often.

One ``Cluster`` is what the API server stores and the scheduler caches, in one place: nodes
and their per-node arrays (``Snapshot``), every pod's ``PodRecord`` (phase, node, devices,
the last scheduling attempt), the pending pods, namespaces, PriorityClasses, PodGroups, the
scheduler with its configuration, and the simulated clock (``now`` and its ``events``).
The modules beside it change this state, each in one way: ``apiserver`` creates objects,
``queue`` and ``schedulingloop`` schedule, ``binder`` binds and frees, ``kubelet`` keeps
the nodes' devices, ``nodes`` changes nodes, ``controllermanager`` runs the controllers and
``runner`` moves the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.objects import Node, Pod
from ..model.parse import NameGenerator
from .clock import EventQueue
from .controllers.base import Controller
from .events import EventLog
from .scheduler import Attempt, Scheduler
from .snapshot import Snapshot


@dataclass
class PodRecord:
    pod: Pod
    node: str | None = None
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    devices: dict[str, list[str]] = field(default_factory=dict)
    container_devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    nominated_node: str | None = None
    start_time: float | None = None
    end_time: float | None = None
    attempts: int = 0
    attempt: Attempt | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    # where the cluster stood at its last attempt (queue.py: whether an event since may help)
    tried_at: float = 0.0
    tried_wakeups: int = 0
    tried_bound: int = 0
    created_at: float = 0.0
    owner: Controller | None = None  # the controller that manages the pod
    owner_key: str | None = None
    finish_token: int = 0  # invalidates a scheduled end when the run is paused


def pod_gpus(pod: Pod) -> int:
    """NVIDIA devices the pod holds once running (whole GPUs, MIG instances, shared replicas)."""
    got = pod.memo.get("gpus")
    if got is None:
        got = pod.memo["gpus"] = sum(v for r, v in pod.requests.items() if r.startswith("nvidia.com/"))
    return got


#: (pod, node) cells of kept explanations before the sim keeps no more (about 12 bytes each:
#: 1,000 nodes x 10,000 pods fits, 5,000 x 100,000 would take 6 GB)
RECORD_CELLS = 10_000_000


class Cluster:
    """Everything the simulated cluster holds; no behaviour beyond small lookups."""

    def __init__(self, seed: int | None = 0, deterministic: bool = False, record: bool = True) -> None:
        self.seed, self.deterministic, self.record = seed, deterministic, record
        # What explain keeps (``keeps``): every cycle's arrays while their (pod, node) cells
        # stay within RECORD_CELLS; past it, none (the session replays its calls to explain a
        # pod: ``backends.sim``), or in a replay only the asked pod's (``record_only``).
        self.kept_cells = 0
        self.dropped = False  # a cycle's explanation was not kept
        self.record_only: str | None = None
        self.now = 0.0  # seconds on the simulated clock
        self.events = EventQueue()  # what happens later on the clock
        self.api_events = EventLog()  # the Event objects the components recorded (kubectl get events)
        self.nodes: dict[str, Node] = {}
        self.node_joined: dict[str, float] = {}  # when each node joined, on the clock (kubectl's AGE)
        self.snapshot = Snapshot()
        self.scheduler = Scheduler.from_config(None, self.snapshot, seed, deterministic, record)
        self.scheduler_config_raw: dict | None = None
        self.records: dict[str, PodRecord] = {}
        self.pending: dict[str, PodRecord] = {}  # pending, unbound pods
        self.gone: list[PodRecord] = []  # deleted pods, for the timeline
        self.running_on: dict[str, dict[str, Pod]] = {}  # node -> its running pods
        self.priority_classes: dict[str, dict] = {}
        self.namespaces: set[str] = {"default", "kube-system"}
        self.pod_groups: dict = {}  # key -> model.podgroup.PodGroup
        self.pod_group_conditions: dict[str, tuple[str, str, str]] = {}  # PodGroupInitiallyScheduled
        self.created = 0  # the next creation order (the queue's tie-break)
        # generateName as the API server does it: random, retried on collision, from the seed
        self.names = NameGenerator(seed, taken=lambda ns, name: f"{ns}/{name}" in self.records)
        self.gpus_allocated = 0
        self.fleet: tuple[int, int, float] | None = None  # gpu nodes, GPUs, $/h (cached)
        self.generation = 0  # bumped by every node change and every pod created, bound or freed
        # Events for the scheduling queue (queue.py): ``wakeups`` counts those that may help any
        # unschedulable pod (a pod left a node, a node came, went or changed, objects a gate
        # waits for appeared, a new scheduler configuration); ``bound`` lists the pods bound, in
        # order, for the hints of plugins that a new pod on a node may satisfy.
        self.wakeups = 0
        self.bound: list[Pod] = []

    def keeps(self, key: str) -> bool:
        """Whether the cycle of pod ``key`` about to run keeps what explain shows."""
        if not self.record:
            return False
        if self.record_only is not None:
            return key == self.record_only
        return self.kept_cells < RECORD_CELLS

    def pods_on(self, node: str) -> list[Pod]:
        return list(self.running_on.get(node, {}).values())

    def nodes_changed(self) -> None:
        """Nodes were added, removed or relabelled: the snapshot and the fleet's totals follow."""
        self.snapshot.set_nodes(self.nodes.values())
        self.fleet = None
