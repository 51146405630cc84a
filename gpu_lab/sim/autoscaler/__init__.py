"""GPU-aware autoscaling: cluster-autoscaler's rules, or Karpenter-style consolidation, as a pure model.

The model knows nothing of the simulator's clock or scheduler. The engine
shows it the cluster, it answers with actions, and says when to look again::

    from gpu_lab.sim.autoscaler import Autoscaler, parse_autoscaler, node_group, node_state, pod_state

    spec = parse_autoscaler(autoscaler_doc)          # gpulab.dev/v1alpha1 Autoscaler (or AutoscalerSpec())
    groups = [g for g in map(node_group, pool_docs) if g]   # NodePools with spec.autoscaling
    scaler = Autoscaler(spec, groups, fits=fits, can_reschedule=can_reschedule, seed=0)

    actions = scaler.reconcile(now, nodes, pending)  # NodeState per Ready node, PodState per unschedulable pod
    for a in actions:
        ScaleUp   -> at a.ready_at add nodes a.nodes of pool a.pool (NodePool: node_pool(doc).node(i))
        ScaleDown -> evict a.evict (controllers recreate them), delete node a.node, now
        Cordon    -> mark a.node unschedulable (a Karpenter replacement is coming)
        Event     -> record it (involved, reason, message, type, source)
    wake = scaler.next_wakeup()                      # call reconcile again then, or on any change
    scaler.status()                                  # per node: why it stays (CA's unremovable reasons)

Calling it: after the events of an instant are processed, whenever a node or a
pod binding changed or pods are pending, and at ``next_wakeup()`` (always later
than the last call; None: nothing will happen by itself). A wake-up with nothing
changed may pass ``changed=False``: the unneeded-node findings are kept and only
the clocks are checked. cluster-autoscaler itself looks every ``scanInterval``
(10 s); calling at most that often is faithful and bounds the cost (a full
evaluation of 200 nodes with ~100 candidates takes a few milliseconds here).
Scale-ups take effect in the same call, several groups at once where CA would
take one scan each; removals of non-empty nodes beyond ``maxDrainParallelism``
wait for the next scan, which ``next_wakeup`` asks for.

Inputs (``state``): ``PodState(namespace, name, requests, owner_kind,
annotations, ref, owner_name, priority_class_name, preemption_policy)``;
``NodeState(name, pool, allocatable, pods, created_at, gpu_node, annotations,
last_pod_event, ref, unschedulable)``; ``NodeGroup(name, max_count,
min_count, provisioning_delay, allocatable, price_per_hour, gpu_node,
template, pods)``. Resources in the scheduler's units (cpu in millicores). Callbacks:
``fits(pod, group) -> True | False | reason`` (may a new node of ``group``,
holding ``group.pods``, take ``pod``, resources aside: the model counts those),
``can_reschedule(pods, without) -> True | False | pod key`` (would all ``pods``
fit on the Ready nodes not named in ``without``) and ``daemon_pods(group,
node)`` (the DaemonSet pods that should run on a real node of the group, or on
its template when ``node`` is None). They default to resource-only answers and
no DaemonSets.

What it does, and where each rule comes from, is in the modules:
``scaleup`` (pending pods -> expander -> nodes after ``provisioningDelay``),
``expander``, ``estimator`` (binpacking), ``templates`` (each group's
template node and its DaemonSet pods), ``scaledown`` (the GPU utilisation
rule, unneeded timers, cooldown, min size), ``drain`` (pods that block),
``consolidation`` (Karpenter), ``spec`` (the ``Autoscaler`` object and its
defaults), ``cost`` (prices, node-hours, dollars), ``adapter`` (from
gpu-lab's ``Node``/``Pod``/NodePool documents).

The lesson in one line: a GPU node is judged by GPU requests alone, so a GPU
node running one small CPU pod is at 0 % and goes once that pod can move; a
1-GPU pod on an 8-GPU node (12.5 %) makes it unneeded too, but it stays for as
long as that pod has nowhere else to go, and so does a node whose pod is bare,
in kube-system, or annotated ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``.
"""

from __future__ import annotations

from ...model.autoscaler import AutoscalerSpec, parse_autoscaler
from .actions import Action, Cordon, Event, ScaleDown, ScaleUp
from .adapter import node_group, node_state, pod_state
from .autoscaler import Autoscaler
from .cost import Cost, NodeLifetime, node_cost, pool_price_per_hour
from .scaledown import NodeStatus
from .state import GPU_RESOURCE, NodeGroup, NodeState, PodState, Utilization, utilization

__all__ = [
    "Action", "Autoscaler", "AutoscalerSpec", "Cordon", "Cost", "Event", "GPU_RESOURCE", "NodeGroup",
    "NodeLifetime", "NodeState", "NodeStatus", "PodState", "ScaleDown", "ScaleUp", "Utilization",
    "node_cost", "node_group", "node_state", "parse_autoscaler", "pod_state", "pool_price_per_hour",
    "utilization",
]
