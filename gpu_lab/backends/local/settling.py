"""When a local lab's scheduling has settled: every user pod placed, finished, or given up
on by kube-scheduler with a verdict that is current (it tried the pod again after the last
node or pod change, or its longest backoff passed without a retry), and the StatefulSets,
DaemonSets and (where Kueue runs) Kueue's Jobs settled too. Pods no verdict will come for
are not waited on: those GangScheduling keeps out of the queue (PreEnqueue) and those whose
ResourceClaims are not there yet."""

from __future__ import annotations

import datetime as dt
import time

from ...dradriver import objects as draobjects
from ...kube import KubeClient
from ...model.podgroup import API_VERSION as POD_GROUP_API
from ...names import SYSTEM_NAMESPACES
from ...names import TERMINAL_PHASES as _TERMINAL
from ..apiobjects import condition
from . import kueueobjects, podsets
from .cluster import LocalCluster
from .kueue import enabled as kueue_enabled

#: kube-scheduler's longest pod backoff (podMaxBackoffSeconds): after a change, a pod it gave
#: up on is retried within this, or the change did not help it
RETRY_WAIT_S = 10.0


def user_pods(client: KubeClient) -> list[dict]:
    """The pods of ``default`` and the user's namespaces."""
    return [p for p in client.list("Pod")["items"]
            if p["metadata"].get("namespace") not in SYSTEM_NAMESPACES - {"default"}]


def _event_seconds(event: dict) -> float:
    """When the scheduler last reported the event (a series' last observation first)."""
    text = ((event.get("series") or {}).get("lastObservedTime") or event.get("lastTimestamp")
            or event.get("eventTime") or "")
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0
    except ValueError:
        return 0.0


class Settling:
    """``settled()`` for one session; ``changed()`` after each node or pod change."""

    def __init__(self, cluster: LocalCluster, client: KubeClient, pod_sets: podsets.PodSets,
                 kueue_jobs: kueueobjects.KueueJobs):
        self.cluster, self.client, self.pod_sets, self.kueue_jobs = cluster, client, pod_sets, kueue_jobs
        self.changed_at: float | None = None  # wall time of the last node or pod change

    def changed(self) -> None:
        """A node or pod changed: pods the scheduler had given up on may fit now."""
        self.changed_at = time.time()

    def settled(self) -> bool:
        # apply() already waited for the controllers' first pods; preempted or finished
        # pods may be gone since, and replacements show up here as pending pods.
        gave_up = []
        pods = user_pods(self.client)
        gated = self._gang_gated(pods) | draobjects.claim_gated(self.client, pods)
        for p in pods:
            phase = (p.get("status") or {}).get("phase")
            if phase in _TERMINAL or p["spec"].get("nodeName") and phase == "Running":
                continue
            if (p["metadata"].get("namespace", "default"), p["metadata"]["name"]) in gated:
                continue
            # SchedulerError: a plugin failed (a CEL selector that fails at runtime) and will again
            if condition(p, "PodScheduled").get("reason") in ("Unschedulable", "SchedulerError") and not (
                p.get("status") or {}
            ).get("nominatedNodeName"):
                gave_up.append(p)
                continue
            return False
        return self._retried_since_change(gave_up) and self.pod_sets.settled() and (
            not kueue_enabled(self.cluster) or self.kueue_jobs.settled())  # Kueue's verdicts too

    def _gang_gated(self, pods: list[dict]) -> set[tuple[str, str]]:
        """Pods that GangScheduling keeps out of kube-scheduler's queue (PreEnqueue): their
        PodGroup does not exist, or its gang has fewer than minCount members. The scheduler
        says nothing about them (no condition, no event), so no wait would end for them."""
        members: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for p in pods:
            group = (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if group and (p.get("status") or {}).get("phase") not in _TERMINAL:
                ns = p["metadata"].get("namespace", "default")
                members.setdefault((ns, group), []).append((ns, p["metadata"]["name"]))
        if not members:
            return set()
        groups = {}
        for g in self.client.list("PodGroup", api_version=POD_GROUP_API)["items"]:
            gang = (g.get("spec") or {}).get("schedulingPolicy", {}).get("gang")
            groups[(g["metadata"]["namespace"], g["metadata"]["name"])] = (gang or {}).get("minCount", 0)
        return {pod for key, pods_of in members.items()
                if key not in groups or len(pods_of) < groups[key] for pod in pods_of}

    def _retried_since_change(self, pods: list[dict]) -> bool:
        """After a node or pod change, an Unschedulable verdict counts only once the scheduler
        has tried the pod again (a newer FailedScheduling event), or once its longest backoff
        has passed without a retry (the change did not help that pod)."""
        if not pods or self.changed_at is None or time.time() - self.changed_at > RETRY_WAIT_S:
            return True
        since = self.changed_at
        last: dict[tuple[str, str], float] = {}
        for e in self.client.list("Event")["items"]:
            obj = e.get("involvedObject") or {}
            if e.get("reason") != "FailedScheduling" or obj.get("kind") != "Pod":
                continue
            key = (obj.get("namespace", ""), obj.get("name", ""))
            last[key] = max(last.get(key, 0.0), _event_seconds(e))
        return all(last.get((p["metadata"].get("namespace", "default"), p["metadata"]["name"]), 0.0)
                   >= since for p in pods)
