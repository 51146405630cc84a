"""What every backend serves: the same calls, the same tables, the same JSON.

A lesson written against ``Session`` runs unchanged on the embedded simulator
and on a real control plane; only ``connect(backend)`` differs. ``CONTRACT`` names
every call; a backend that cannot serve one raises ``NotSupported`` with one line
that names the backend and why, never ``AttributeError``.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import pandas as pd

from ..collector import collector_paused
from ..errors import GpuLabError, NotSupported
from ..model.arguments import check_name
from .description import NodeDescription, describe
from .events import EventRow, events_frame
from .kubectl.output import KubectlOutput
from .kubectl.real import Target, run_kubectl
from .tables import NodeRow, PodRow, document, nodes_frame, pods_frame

CONTRACT = ("apply", "schedule", "pods", "nodes", "explain", "reset", "describe_node", "kill_plugin",
            "restart_plugin", "fail_device", "heal_device", "label_node", "cordon", "advance", "delete", "close", "to_dict", "now",
            "timeline", "jobs", "autoscaler_events", "events", "kubectl")

Source = str | Path | dict | list





class Session(abc.ABC):
    """One cluster, whichever backend runs it: ``gpu_lab.connect(backend)`` opens one."""

    backend: str = ""

    @abc.abstractmethod
    def apply(self, src: Source) -> list[str]:
        """Create the objects in a manifest (YAML text, a path, dicts); returns "kind/name" refs."""

    @abc.abstractmethod
    def schedule(self) -> pd.DataFrame:
        """Let the scheduler place every pending pod it can; returns ``pods()``."""

    @abc.abstractmethod
    def _pod_rows(self) -> list[PodRow]:
        """What the backend knows of each pod it shows."""

    @abc.abstractmethod
    def _node_rows(self) -> list[NodeRow]:
        """What the backend knows of each node."""

    def pods(self) -> pd.DataFrame:
        """One row per pod: namespace, name, node, phase, message, requests, devices."""
        with collector_paused():
            return pods_frame(self._pod_rows())

    def nodes(self) -> pd.DataFrame:
        """One row per node: capacity, allocatable and requested resources, GPU labels."""
        with collector_paused():
            return nodes_frame(self._node_rows())

    @abc.abstractmethod
    def explain(self, pod: str) -> Any:
        """Why the pod is where it is (or pending): per-node filter and score tables."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget every object; start from an empty cluster."""

    def describe_node(self, node: str) -> NodeDescription:
        """What ``kubectl describe node`` shows: labels, taints, capacity, allocatable, the
        node's pods and their allocated requests. ``print()`` it, or read its fields."""
        check_name(node, "describe_node")
        rows = [r for r in self._node_rows() if r.name == node]
        if not rows:
            raise GpuLabError(f'nodes "{node}" not found')
        return describe(rows[0], self._pod_rows())

    def _unsupported(self, call: str, why: str) -> NotSupported:
        return NotSupported(f'{call}: not on the "{self.backend}" backend: {why}')

    def kill_plugin(self, node: str) -> None:
        """The node's NVIDIA device plugin dies: allocatable GPUs drop to 0, capacity stays."""
        raise self._unsupported("kill_plugin", "gpu-lab does not run this cluster's device plugins")

    def restart_plugin(self, node: str) -> None:
        """The device plugin comes back and re-registers its devices."""
        raise self._unsupported("restart_plugin", "gpu-lab does not run this cluster's device plugins")

    def fail_device(self, node: str, index: int, reason: str = "Xid 79") -> None:
        """GPU ``index`` of the node fails (an Xid error): the device plugin reports its devices
        Unhealthy, allocatable drops by them, capacity stays; the pod using it is not evicted."""
        raise self._unsupported("fail_device", "gpu-lab does not run this cluster's device plugins")

    def heal_device(self, node: str, index: int) -> None:
        """GPU ``index`` of the node is healthy again: allocatable comes back."""
        raise self._unsupported("heal_device", "gpu-lab does not run this cluster's device plugins")

    def label_node(self, node: str, labels: dict[str, str | None], *, evict: bool = False) -> list[str]:
        """``kubectl label node``; ``nvidia.com/mig.config`` repartitions MIG GPUs."""
        raise self._unsupported("label_node", "nodes are read-only here")

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (``uncordon`` with ``unschedulable=False``)."""
        raise self._unsupported("cordon", "nodes are read-only here")

    def advance(self, seconds: float | None = None) -> pd.DataFrame:
        """Move the clock ``seconds`` forward (None: until no timed pod runs); returns ``pods()``."""
        raise self._unsupported("advance", "this cluster runs on real time only")

    def delete(self, pod: str) -> None:
        """Delete a pod (``namespace/name``, or ``name`` in default)."""
        raise self._unsupported("delete", "this backend cannot delete pods")

    def timeline(self) -> pd.DataFrame:
        """One row per pod ever created: owner, node, GPUs, phase, created/started/finished
        times in seconds, and seconds it held GPUs idle waiting for a rendezvous."""
        raise self._unsupported("timeline", "pod timelines are kept by the simulated clock only")

    def jobs(self) -> pd.DataFrame:
        """One row per Job: state (Complete, Running, Pending, Suspended, Failed), queue, GPUs,
        and when it was admitted, started and finished."""
        raise self._unsupported("jobs", "Job histories are kept by the simulated clock only")

    def autoscaler_events(self) -> pd.DataFrame:
        """What the autoscaler decided (scale-ups, scale-downs, why a node stays), with times."""
        raise self._unsupported("autoscaler_events", "gpu-lab does not run this cluster's autoscaler")

    def events(self, namespace: str | None = None, kind: str | None = None, name: str | None = None) -> pd.DataFrame:
        """What ``kubectl get events`` shows, oldest first: one row per Event object (namespace,
        ``object`` as Kind/name, type Normal or Warning, reason, message, and the count the
        API server keeps for repeats), in the namespaces gpu-lab manages, since the last
        ``reset``. ``kind`` (e.g. "ReplicaSet"), ``name`` and ``namespace`` filter."""
        return events_frame(self._event_rows(), namespace, kind, name)

    def _event_rows(self) -> list[EventRow]:
        raise self._unsupported("events", "this backend keeps no Events")

    def kubectl(self, command: str) -> KubectlOutput:
        """What ``kubectl COMMAND`` prints against this lab, e.g. ``lab.kubectl("get pods -o
        wide")``: the real kubectl on a real cluster (read-only verbs, the lab's kubeconfig and
        namespace); on the sim, gpu-lab's rendering in kubectl's format of ``get pods``,
        ``get nodes``, ``get events`` and ``describe node NAME``. ``print()`` it, or end a
        notebook cell with it."""
        return run_kubectl(command, self._kubectl_target())

    def _kubectl_target(self) -> Target:
        raise self._unsupported("kubectl", "this backend names no kubeconfig for kubectl")

    def _pod_manifests(self) -> dict[str, Any]:
        """``{namespace/name: manifest or Pod}`` of the pods this session can show in full
        (annotations, containers): what ``gpu_lab.metrics.gpu_uses`` reads."""
        return {}

    def close(self) -> None:  # noqa: B027 - a no-op is right where nothing is held
        """Release what the session holds (processes, connections); the cluster stays."""

    @property
    def now(self) -> float:
        """Seconds on the session's clock (the simulated clock on ``sim``)."""
        return 0.0

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def to_dict(self) -> dict[str, Any]:
        """The ``gpu-lab run --json`` document."""
        with collector_paused():
            return document(self.backend, self._pod_rows(), self._node_rows())
