"""Every plugin the simulator knows, in one place (like framework/plugins/registry.go).

``DEFAULT_MULTIPOINT`` is kube-scheduler v1.37's default plugin list with its
score weights (pkg/scheduler/apis/config/v1/default_plugins.go), with the GenericWorkload
gate on as in the local lab (which appends GangScheduling). Plugins that
only matter for volumes, images or alpha features are not modelled; a profile
that enables one is refused with a clear error rather than silently ignored.
"""

from __future__ import annotations

from ..framework import Plugin
from .defaultpreemption import DefaultPreemption
from .dynamicresources import DynamicResources
from .gangscheduling import GangScheduling
from .interpodaffinity import InterPodAffinity
from .nodeaffinity import NodeAffinity
from .nodename import NodeName
from .nodeports import NodePorts
from .noderesources.balanced_allocation import BalancedAllocation
from .noderesources.fit import Fit
from .nodeunschedulable import NodeUnschedulable
from .podtopologyspread import PodTopologySpread
from .tainttoleration import TaintToleration

REGISTRY: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (
        NodeName,
        NodeUnschedulable,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        Fit,
        PodTopologySpread,
        InterPodAffinity,
        DynamicResources,
        DefaultPreemption,
        BalancedAllocation,
        GangScheduling,
    )
}

# Order matters: Filter runs in this order and a node's reason comes from the
# first plugin that rejects it.
DEFAULT_MULTIPOINT: list[dict] = [
    {"name": "NodeName"},
    {"name": "NodeUnschedulable"},
    {"name": "TaintToleration", "weight": 3},
    {"name": "NodeAffinity", "weight": 2},
    {"name": "NodePorts"},
    {"name": "NodeResourcesFit", "weight": 1},
    {"name": "PodTopologySpread", "weight": 2},
    {"name": "InterPodAffinity", "weight": 2},
    {"name": "DynamicResources", "weight": 2},  # applyDynamicResources: before DefaultPreemption
    {"name": "DefaultPreemption"},
    {"name": "NodeResourcesBalancedAllocation", "weight": 1},
    {"name": "GangScheduling"},  # applyGangScheduling: appended when GenericWorkload is on
]
