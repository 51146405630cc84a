"""The control plane's components: their names, start order, dependencies and ports.

Four processes make a lab's control plane; the node agent, its device plugins and Kueue
are reported beside them (``gpu-lab status``) under the names below.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpu_lab.errors import LocalClusterError

from ...kubelet import agentprocess
from .ports import HOST

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
#: start order; ``down`` stops in reverse
COMPONENTS = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER)
ALIASES = {
    "apiserver": APISERVER,
    "controller-manager": CONTROLLER_MANAGER,
    "kcm": CONTROLLER_MANAGER,
    "scheduler": SCHEDULER,
}
#: a component is restarted when a port it connects to changes
DEPENDS_ON = {
    APISERVER: (ETCD,),
    CONTROLLER_MANAGER: (APISERVER,),
    SCHEDULER: (APISERVER,),
}
#: listening ports, by the component that owns them
PORT_KEYS = {
    "etcd": ETCD,
    "etcd-peer": ETCD,
    APISERVER: APISERVER,
    CONTROLLER_MANAGER: CONTROLLER_MANAGER,
    SCHEDULER: SCHEDULER,
}
#: the node agent and device plugins, in ``full_status()``
NODEAGENT = agentprocess.AGENT
PLUGIN_PREFIX = "device-plugin/"


@dataclass(frozen=True)
class ComponentStatus:
    """One component: ``state`` is ``healthy``, ``unhealthy``, ``running`` (alive, health
    not checked) or ``stopped``."""

    name: str
    state: str
    pid: int | None
    port: int | None
    url: str | None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def canonical(component: str) -> str:
    """``scheduler`` -> ``kube-scheduler`` etc.; raises on an unknown name."""
    c = ALIASES.get(component, component)
    if c not in COMPONENTS:
        raise LocalClusterError(
            f"unknown component {component!r}; choose from {', '.join(COMPONENTS)}"
        )
    return c


def dependents(components: set[str]) -> set[str]:
    """Components that connect to one of ``components`` (and so must restart when its
    port changes); a restarted component keeps its own port, so this does not cascade."""
    return {d for d, deps in DEPENDS_ON.items() if set(deps) & components}


__all__ = [
    "ALIASES",
    "APISERVER",
    "COMPONENTS",
    "CONTROLLER_MANAGER",
    "ComponentStatus",
    "DEPENDS_ON",
    "ETCD",
    "HOST",
    "NODEAGENT",
    "PLUGIN_PREFIX",
    "PORT_KEYS",
    "SCHEDULER",
    "canonical",
    "dependents",
]
