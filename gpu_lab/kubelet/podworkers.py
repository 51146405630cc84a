"""The pods bound to the agent's nodes, one worker thread per node handling its pods in
order, as the kubelet's pod workers do: admission (device-manager ``Allocate`` for every
container, then the resource-fit predicate, then DRA's PrepareResources), the pod turned
Running with its devices in annotations, rejected with the kubelet's reason, evicted by the
MIG manager, ended after its ``gpulab.dev/duration``, deleted at once when it is being
deleted; a pod gone releases its devices."""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from typing import Any

from ..dradriver import prepare as dra
from ..errors import DeviceAllocationError, GpuLabError
from ..kube import ApiError, KubeClient, NotFound, Unreachable
from ..model.nodepool import MIG_CONFIG_LABEL
from ..names import TERMINAL_PHASES
from . import events, migmanager
from . import podlifecycle as pl
from .admission import REJECTED_PREFIX, admit_devices, fit_failure
from .dramanager import prepare_claims
from .node import AgentNode, PodState
from .timers import Timers

log = logging.getLogger("gpu_lab.nodeagent")

#: the pods the agent follows: every pod bound to a node (the workers keep their nodes' own)
BOUND_PODS = "spec.nodeName!="
QUEUE_POLL_S = 0.2


class PodWorkers:
    """Hands pods (and timers, MIG runs) to the worker of their node; runs the workers."""

    def __init__(self, nodes: dict[str, AgentNode], timers: Timers, stopping: threading.Event):
        self.nodes, self.timers, self.stopping = nodes, timers, stopping

    # ------------------------------------------------------------------ to the workers
    def dispatch(self, kind: str, pod: dict) -> None:
        sn = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if sn is not None and not sn.retired:
            sn.queue.put(("pod", kind, pod))

    def resync(self, pods: list[dict]) -> list[threading.Event]:
        """Hand a full pod list to the workers; pods they know that the list lacks are
        gone. Returns one event per node, set once its worker has handled the list."""
        seen: dict[str, set[str]] = {name: set() for name in self.nodes}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in seen:
                seen[node].add(pod["metadata"]["uid"])
                self.dispatch("ADDED", pod)
        done = []
        for name, uids in seen.items():
            ev = threading.Event()
            self.nodes[name].queue.put(("sync", uids, ev))
            done.append(ev)
        return done

    def deliver(self, node: str, uid: str, what: str) -> None:
        """A timer fell due (``complete`` or ``prepare``)."""
        self.nodes[node].queue.put((what, uid, None))

    def run(self, client: KubeClient, sn: AgentNode) -> None:
        """The worker of ``sn``, until the agent stops or the node is retired."""
        while not self.stopping.is_set() and not sn.retired:
            try:
                what, a, b = sn.queue.get(timeout=QUEUE_POLL_S)
            except queue.Empty:
                continue
            try:
                if what == "pod":
                    self._on_pod(client, sn, a, b)
                elif what == "complete":
                    self._complete(client, sn, a)
                elif what == "prepare":
                    self._retry_prepare(client, sn, a)
                elif what == "mig":
                    self._mig(client, sn, a)
                elif what == "sync":
                    for uid in [u for u in sn.pods if u not in a]:
                        self._forget(sn, uid)
                    b.set()
            except Unreachable as err:
                log.warning("%s: %s", sn.name, err)
            except Exception:  # noqa: BLE001 - one bad pod must not stop the node
                log.exception("%s: handling a pod", sn.name)

    # ------------------------------------------------------------------ a pod's life
    def _on_pod(self, client: KubeClient, sn: AgentNode, kind: str, pod: dict) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        st = sn.pods.get(uid)
        if kind == "DELETED":
            self._forget(sn, uid)
            return
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(meta.get("deletionTimestamp"))
        if st is None:
            st = PodState(uid, pl.pod_key(pod))
            sn.pods[uid] = st
            if phase in TERMINAL_PHASES:
                st.terminal = True
            elif phase == "Running":
                self._adopt(sn, st, pod)
            elif not deleting:
                self._admit(client, sn, st, pod)
        elif phase in TERMINAL_PHASES and not st.terminal:
            self._release(sn, st)
            st.terminal = True
        if deleting and not st.deleting:
            st.deleting = True
            self._release(sn, st)
            _delete_now(client, pod)

    def _forget(self, sn: AgentNode, uid: str) -> None:
        st = sn.pods.pop(uid, None)
        if st is not None:
            self._release(sn, st)

    def _release(self, sn: AgentNode, st: PodState) -> None:
        if st.admitted:
            st.admitted = False
            sn.manager.pods.release(st.uid)
            log.info("%s: released %s", sn.name, st.key)

    def _adopt(self, sn: AgentNode, st: PodState, pod: dict) -> None:
        """A pod this node ran before the agent (re)started: hold its devices again."""
        meta = pod.get("metadata") or {}
        st.requests = pl.pod_requests(pod)
        st.admitted = True
        st.started = (pod.get("status") or {}).get("startTime")
        try:
            held = json.loads((meta.get("annotations") or {}).get(pl.DEVICES_ANNOTATION) or "{}")
        except ValueError:
            held = {}
        for container, per in (held or {}).items():
            for r, ids in (per or {}).items():
                try:
                    sn.manager.allocate(st.uid, container, r, len(ids), prefer=lambda *_, ids=ids: ids)
                except (DeviceAllocationError, GpuLabError) as err:
                    log.warning("%s: %s keeps running without its %s: %s", sn.name, st.key, r, err)
        self._schedule_end(sn, st, pod)
        log.info("%s: adopted running pod %s", sn.name, st.key)

    def _admit(self, client: KubeClient, sn: AgentNode, st: PodState, pod: dict) -> None:
        meta = pod["metadata"]
        m = sn.manager
        got = admit_devices(
            m, st.uid, pl.device_requests(pod, set(m.capacity())), sn.config,
            kubelet=sn.kubelet, plugin_resources=sn.plugin_resources,
            topology_policy=sn.node.topology_manager_policy,
        )  # fmt: skip
        if got.failure:
            self._reject(client, sn, st, pod, *got.failure)
            return
        devices, envs = got.devices, got.envs
        st.requests = pl.pod_requests(pod)
        used, count = sn.used()
        failure = fit_failure(st.requests, used, count, sn.admission_allocatable())
        if failure:
            m.pods.release(st.uid)
            self._reject(client, sn, st, pod, *failure)
            return
        cdi: dict[str, list[str]] = {}
        if dra.uses_claims(pod):
            prepared = prepare_claims(client, sn, st, pod,
                                      lambda s: self.timers.after(s, sn.name, st.uid, "prepare"))
            if prepared is None:
                m.pods.release(st.uid)
                return
            for container, per in prepared.devices.items():
                devices.setdefault(container, {}).update(per)
                envs.setdefault(container, {}).update(prepared.env[container])
            cdi = prepared.cdi
        st.admitted = True
        spec = pod.get("spec") or {}
        pod_ip = sn.ip if spec.get("hostNetwork") else sn.next_pod_ip()
        status = pl.running_status(pod, sn.ip, pod_ip)
        st.started = status["startTime"]
        body: dict[str, Any] = {"metadata": {"uid": st.uid}, "status": status}
        if devices:
            body["metadata"]["annotations"] = {
                pl.DEVICES_ANNOTATION: json.dumps(devices, sort_keys=True),
                pl.ENV_ANNOTATION: json.dumps(envs, sort_keys=True),
            }
            if cdi:
                body["metadata"]["annotations"][pl.CDI_ANNOTATION] = json.dumps(cdi, sort_keys=True)
        try:
            client.patch(
                "Pod", meta["name"], body, namespace=meta["namespace"],
                patch_type="strategic", subresource="status",
            )  # fmt: skip
        except ApiError as err:
            log.info("%s: %s went away before it started: %s", sn.name, st.key, err)
            self._release(sn, st)
            st.terminal = True
            return
        log.info("%s: %s running%s", sn.name, st.key, f" with {devices}" if devices else "")
        self._schedule_end(sn, st, pod, fresh=True)

    def _reject(
        self, client: KubeClient, sn: AgentNode, st: PodState, pod: dict, reason: str, message: str
    ) -> None:
        st.terminal = True
        meta = pod["metadata"]
        log.info("%s: rejected %s: %s: %s", sn.name, st.key, reason, message)
        events.warning(client, sn.name, pod, reason, message.removeprefix(REJECTED_PREFIX))
        body = {"metadata": {"uid": st.uid}, "status": pl.rejected_status(reason, message)}
        with contextlib.suppress(ApiError):
            client.patch(
                "Pod", meta["name"], body, namespace=meta["namespace"],
                patch_type="strategic", subresource="status",
            )  # fmt: skip

    def _current(self, client: KubeClient, sn: AgentNode, uid: str, admitted: bool):
        """``(state, pod)`` when the pod ``uid`` is still this node's, live, admitted or not
        as asked, and still the same object on the API server; else None (a pod that is gone
        or was recreated under its name is forgotten)."""
        st = sn.pods.get(uid)
        if st is None or st.admitted != admitted or st.terminal or st.deleting:
            return None
        namespace, name = st.key.split("/", 1)
        try:
            pod = client.get("Pod", name, namespace)
        except NotFound:
            pod = None
        if pod is None or pod["metadata"].get("uid") != uid:
            self._forget(sn, uid)
            return None
        return st, pod

    def _retry_prepare(self, client: KubeClient, sn: AgentNode, uid: str) -> None:
        current = self._current(client, sn, uid, admitted=False)
        if current is not None and not current[1]["metadata"].get("deletionTimestamp"):
            self._admit(client, sn, *current)

    # ------------------------------------------------------------------ endings
    def _schedule_end(self, sn: AgentNode, st: PodState, pod: dict, fresh: bool = False) -> None:
        """Queue the end of a pod annotated with a duration (from now when ``fresh``,
        else from its startTime)."""
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(pl.DURATION_ANNOTATION)
        if not text:
            return
        try:
            seconds = pl.parse_duration(text)
        except GpuLabError as err:
            log.warning("%s: %s runs until deleted: %s", sn.name, st.key, err)
            return
        started = None if fresh else pl.parse_time(st.started)
        remaining = seconds if started is None else max(0.0, started + seconds - time.time())
        self.timers.after(remaining, sn.name, st.uid, "complete")

    def _complete(self, client: KubeClient, sn: AgentNode, uid: str) -> None:
        current = self._current(client, sn, uid, admitted=True)
        if current is None:
            return
        st, pod = current
        namespace, name = st.key.split("/", 1)
        body = {"metadata": {"uid": uid}, "status": pl.succeeded_status(pod, st.started)}
        with contextlib.suppress(ApiError):
            client.patch(
                "Pod", name, body, namespace=namespace, patch_type="strategic", subresource="status"
            )
        st.terminal = True
        self._release(sn, st)
        log.info("%s: %s completed", sn.name, st.key)

    def _evict(self, client: KubeClient, sn: AgentNode, key: str, message: str) -> None:
        """The kubelet evicts a pod: a Warning event, phase Failed with reason Evicted, its
        devices released."""
        st = next((st for st in sn.pods.values() if st.key == key and not st.terminal), None)
        if st is None:
            return
        namespace, name = key.split("/", 1)
        pod = {"metadata": {"name": name, "namespace": namespace, "uid": st.uid}}
        events.warning(client, sn.name, pod, "Evicted", message)
        body = {"metadata": {"uid": st.uid}, "status": pl.evicted_status(message)}
        with contextlib.suppress(ApiError):
            client.patch("Pod", name, body, namespace=namespace, patch_type="strategic",
                         subresource="status")
        st.terminal = True
        self._release(sn, st)
        log.info("%s: evicted %s: %s", sn.name, key, message)

    def _mig(self, client: KubeClient, sn: AgentNode, wanted: str) -> None:
        """The node's MIG manager, on its worker: pods and repartitioning never interleave."""
        try:
            outcome = migmanager.run(client, sn, wanted, lambda key, why: self._evict(client, sn, key, why))
        except (GpuLabError, ApiError, Unreachable) as err:
            outcome = migmanager.MigOutcome(wanted, "failed", message=str(err))
        finally:
            plugin = sn.plugin
            if sn.has_plugin and plugin is not None and not plugin.alive:
                plugin.start()  # never leave the node without its plugin
        log.info("%s: MIG manager: %s=%s: %s %s", sn.name, MIG_CONFIG_LABEL, wanted, outcome.state,
                 outcome.message)
        sn.mig_outcome = outcome
        sn.mig_runs += 1  # after the outcome: a reader that sees the count sees the outcome


def _delete_now(client: KubeClient, pod: dict) -> None:
    """Delete a pod being deleted at once (``gracePeriodSeconds=0``), as only its uid."""
    meta = pod["metadata"]
    path = client.resource("Pod").path(meta["namespace"], meta["name"])
    body = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": meta["uid"]},
    }
    with contextlib.suppress(ApiError):  # gone, or another pod by now (uid precondition)
        client.request("DELETE", path, body=body)
