"""``connect("kind")``: the Session API on a kind cluster gpu-lab made, with real kubelets and
the fake NVIDIA device plugin.

    lab = connect("kind", name="gpu-lab")
    lab.apply("lessons/scenarios/first_cluster.yaml")   # creates the cluster (or reuses it)
    lab.schedule(); lab.pods(); lab.explain("train-0")

The cluster is gpu-lab's own, so the kubeconfig backend's rules are relaxed where they
protect someone else's cluster and kept where they keep runs apart: the scenario's Nodes and
NodePools shape the cluster (``KindCluster.up``: created on first use, reused while the nodes
are the same, refused with one line when they differ); its PriorityClasses are created
(labelled ``gpulab.dev/managed=true`` and deleted by ``reset``); workloads go to gpu-lab's
namespace as on the kubeconfig backend; node changes (labels, taints, cordon) are allowed,
every node carrying ``gpulab.dev/owned=true``. A KubeSchedulerConfiguration is refused: the
kind cluster runs kubeadm's kube-scheduler with its defaults. ``explain`` adds to the pod's
condition and events the real scheduler's own filter result and per-plugin scores, read from
its log (``scheduler.py``), in the sim's shape, as on the local backend.

No image can be pulled here, so by default (``placeholder_images=True``) every container whose
image is not gpu-lab's own runs gpu-lab's image (``gpu-lab/fake-device-plugin``, loaded on
every node) with a ``sleep`` that ends on SIGTERM: pods are scheduled, get their devices and reach
Running, as on the other backends. ``placeholder_images=False`` keeps your images (a pod is
then scheduled, bound and given its devices, and waits with ErrImagePull).
``show_devices_pod`` runs gpu-lab's image to print the ``NVIDIA_VISIBLE_DEVICES`` its
container got.

What differs from the other backends, by construction: a kind node's CPU, memory and pod
capacity are the Docker host's (a scenario's ``cpu: "192"`` is not reproduced).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from ...errors import GpuLabError
from ...kube import KubeClient, NotFound
from ...kubelet import gpuhealth
from ...kubelet.gpuhealth import DEFAULT_REASON
from ...model import arguments as args
from ...model.documents import load_documents
from ..apiobjects import device_allocatable, pod_row
from ..base import Source
from ..kubeconfig import MANAGED_LABEL
from ..kubeconfig.session import KubeconfigSession
from ..kubectl.real import Target
from ..local import schedulerlog
from . import gpuhealth as kind_health
from .cluster import KindCluster
from .config import DEFAULT_NAME, kind_node_names
from .devices import VisibleDevices
from .manifests import IMAGE, NAMESPACE, PLUGIN_STOPPED_LABEL
from .scheduler import SchedulerLog, configz

NODE_KINDS = ("Node", "NodePool")
#: what the kubelet says while it is still creating a pod's containers
STARTING = ("ContainerCreating", "PodInitializing")


class KindSession(KubeconfigSession):
    backend = "kind"

    def __init__(self, name: str = DEFAULT_NAME, root: Path | str | None = None, *,
                 namespace: str = "gpu-lab", timeout: float = 120.0, settle: float = 1.0,
                 progress: Any = None, placeholder_images: bool = True):
        self.cluster = KindCluster(name, root)
        self._progress = progress
        self.placeholder_images = placeholder_images
        self._devices = VisibleDevices(self.cluster)
        self._connected = False
        self._scheduler_log: SchedulerLog | None = None
        self._scheduler_config: dict | None = None  # kubeadm's scheduler never changes it
        self._log_mark = 0  # where this session's part of the scheduler log begins (reset)
        if self.cluster.kubeconfig().exists():
            self._open(namespace, timeout, settle)
        else:  # no cluster yet: the first apply with nodes makes one
            self.namespace = namespace
            self.timeout, self.settle = timeout, settle
            self.allow_node_changes = True
            self._expected_pods = 0

    def __repr__(self) -> str:
        return f"KindSession(name={self.cluster.name!r}, namespace={self.namespace!r})"

    def _open(self, namespace: str, timeout: float, settle: float) -> None:
        client = KubeClient.from_kubeconfig(self.cluster.kubeconfig(), None, timeout=60.0)
        super().__init__(client=client, allow_node_changes=True, namespace=namespace,
                         timeout=timeout, settle=settle)
        self._connected = True
        self._scheduler_log = SchedulerLog(client)

    def _require_cluster(self) -> None:
        if not self._connected:
            raise GpuLabError(
                f"no kind cluster {self.cluster.name!r} yet: apply a scenario with Nodes or "
                f"NodePools, or `gpu-lab up --backend kind --name {self.cluster.name} --scenario FILE`")

    def close(self) -> None:
        if self._connected:
            super().close()

    def _kubectl_target(self) -> Target:
        """The kind cluster's kubeconfig; gpu-lab's namespace unless the command names one."""
        self._require_cluster()
        return Target(self.cluster.kubeconfig(), None, self.namespace)

    # ------------------------------------------------------------- apply
    def apply(self, src: Source) -> list[str]:
        docs = load_documents(src)
        for d in docs:
            if d.get("kind") == "KubeSchedulerConfiguration":
                raise GpuLabError(
                    "refusing KubeSchedulerConfiguration: the kind backend runs kubeadm's "
                    "kube-scheduler with its default profile (scheduler profiles run on sim and local)")
        nodes = [d for d in docs if d.get("kind") in NODE_KINDS]
        refs: list[str] = []
        if nodes:
            plan = self.cluster.up(nodes, progress=self._progress)
            refs += [f"node/{w.node}" for w in plan.workers]
            if not self._connected:
                self._open(self.namespace, self.timeout, self.settle)
        self._require_cluster()
        for d in docs:
            if d.get("kind") == "PriorityClass":
                refs.append(self._priority_class(d))
        rest = [d for d in docs if d.get("kind") not in (*NODE_KINDS, "PriorityClass")]
        if self.placeholder_images:
            rest = [placeholder(d) for d in rest]
        if rest:
            refs += super().apply(rest)
        return refs

    def _priority_class(self, doc: dict) -> str:
        name = doc["metadata"]["name"]
        body = {**doc, "metadata": {**doc["metadata"],
                                    "labels": {**(doc["metadata"].get("labels") or {}),
                                               MANAGED_LABEL: "true"}}}
        try:
            have = self.client.get("PriorityClass", name)
        except NotFound:
            self.client.create(body)
            return f"priorityclass/{name}"
        ours = (have.get("metadata", {}).get("labels") or {}).get(MANAGED_LABEL) == "true"
        if not ours and have.get("value") != doc.get("value"):
            raise GpuLabError(f'PriorityClass "{name}" exists with value {have.get("value")}, '
                              f"not {doc.get('value')}, and gpu-lab did not create it")
        return f"priorityclass/{name}"

    # ------------------------------------------------------------- reset
    def reset(self, force: bool = False, wait: bool = True) -> None:
        if not self._connected:
            return
        super().reset(force=force, wait=wait)
        for pc in self.client.list("PriorityClass", label_selector=f"{MANAGED_LABEL}=true")["items"]:
            self.client.delete("PriorityClass", pc["metadata"]["name"], missing_ok=True)
        self._log_mark = self._log().mark()

    # ----------------------------------------------------------- explain
    def _log(self) -> SchedulerLog:
        self._require_cluster()
        assert self._scheduler_log is not None  # made with the client
        return self._scheduler_log

    def _effective_scheduler_config(self) -> dict:
        if self._scheduler_config is None:
            self._scheduler_config = configz(kind_node_names(self.cluster.name, 0)[0])
        return self._scheduler_config

    def explain(self, pod: str):
        """The real scheduler's account of a pod (its PodScheduled condition and events) with
        the filter result and per-plugin scores of its latest attempt, as kube-scheduler
        logged them (weights from its own /configz)."""
        self._require_cluster()
        return schedulerlog.explain(
            super().explain(pod), self._log().attempts(), self._effective_scheduler_config,
            lambda: [n["metadata"]["name"] for n in self.client.list("Node")["items"]])

    def _scheduling_history(self) -> list[schedulerlog.Attempt]:
        """The real scheduler's attempts at gpu-lab's pods since the last reset, in order
        (fidelity.py replays its choices among equal totals on the sim)."""
        ours = f"{self.namespace}/"
        return [a for a in self._log().history(self._log_mark) if a.pod.startswith(ours)]

    # ------------------------------------------------------- the plugin
    def kill_plugin(self, node: str) -> None:
        """The node's device plugin pod goes away and stays away (the node is labelled out of
        its DaemonSet); returns once the kubelet reports allocatable 0 (capacity stays)."""
        self._require_cluster()
        self.label_node(node, {PLUGIN_STOPPED_LABEL: "true"})
        self._wait(lambda: not _plugin_pods(self.client, node), f"the device plugin pod on {node} to stop")
        self._wait(lambda: _gpus_reported(self.client, node, False),
                   f"node {node}'s kubelet to report its nvidia.com/* allocatable at 0")

    def restart_plugin(self, node: str) -> None:
        """The DaemonSet runs the plugin on the node again; returns once it re-registered."""
        self._require_cluster()
        self.label_node(node, {PLUGIN_STOPPED_LABEL: None})
        self._wait(lambda: _gpus_reported(self.client, node, True),
                   f"node {node}'s kubelet to report its nvidia.com/* allocatable back")

    def fail_device(self, node: str, index: int, reason: str = DEFAULT_REASON) -> None:
        """GPU ``index`` fails: the plugin on the node reads its UUID in the control file and
        reports that GPU's devices Unhealthy to the real kubelet; returns once the Node's
        allocatable has dropped (capacity stays, the pod holding it keeps running)."""
        self._set_gpu_health("fail_device", node, index, reason)

    def heal_device(self, node: str, index: int) -> None:
        """GPU ``index`` reports Healthy again; returns once allocatable has grown back."""
        self._set_gpu_health("heal_device", node, index, None)

    def _set_gpu_health(self, call: str, node: str, index: int, reason: str | None) -> None:
        self._require_cluster()
        args.check_name(node, call)
        container = self.cluster.containers_of_nodes().get(node)
        if container is None:
            raise GpuLabError(f'nodes "{node}" not found')
        labels = self.client.get("Node", node)["metadata"].get("labels") or {}
        count = int(labels.get(gpuhealth.COUNT_LABEL, 0))  # GPU Feature Discovery's count
        index = gpuhealth.check_index(node, count, index, call)
        if reason is not None:
            reason = gpuhealth.check_reason(reason, call)
        failed = gpuhealth.failed_in(kind_health.read(container), node, count)
        changes = (index not in failed) if reason is not None else (index in failed)
        gpuhealth.record(failed, index, reason)
        before = sum(device_allocatable(self.client.get("Node", node)).values())
        kind_health.write(container, gpuhealth.health_file(node, count, failed))
        if changes and _plugin_pods(self.client, node):
            grew = reason is None

            def moved() -> bool:
                now = sum(device_allocatable(self.client.get("Node", node)).values())
                return now > before if grew else now < before

            self._wait(moved, f"node {node}'s kubelet to report GPU {index} {'healthy' if grew else 'failed'}")

    def advance(self, seconds: float | None = None):
        """A real cluster's clock cannot be moved: this waits ``seconds`` of real time (the
        kubelet's 5-minute grace for a dead plugin takes 5 minutes here). ``None`` (until no
        timed pod runs) is refused: pods on kind run until deleted."""
        if seconds is None:
            raise self._unsupported("advance(None)", "pods run until deleted; give seconds to wait")
        time.sleep(max(0.0, float(seconds)))
        return self.schedule()

    # ------------------------------------------------------------- pods
    def _our_pods(self) -> list[dict]:
        return super()._our_pods() if self._connected else []  # no cluster yet: no pods

    def _event_rows(self):
        return super()._event_rows() if self._connected else []  # no cluster yet: no Events

    def _pod_rows(self):
        """Rows as on the kubeconfig backend, plus each running pod's devices: the
        ``NVIDIA_VISIBLE_DEVICES`` its container got from our plugin's ``Allocate``, read
        from the container runtime on its node (``crictl inspect``)."""
        pods = self._our_pods()
        return self._devices.fill(pods, [pod_row(p) for p in pods])

    def _node_rows(self):
        return super()._node_rows() if self._connected else []

    @staticmethod
    def scheduler_done(pod: dict) -> bool:
        """Done with as on a kubeconfig cluster, and a bound pod's kubelet has started it or
        says why it cannot (ErrImagePull, ...): a real kubelet takes a moment to create the
        containers, and until then the pod is still Pending, which would read as waiting."""
        if not KubeconfigSession.scheduler_done(pod):
            return False
        status = pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName") or status.get("phase") != "Pending":
            return True
        states = [s.get("state") or {} for key in ("initContainerStatuses", "containerStatuses")
                  for s in status.get(key) or []]
        return any((st.get("waiting") or {}).get("reason") not in (None, *STARTING) for st in states)

    def schedule(self):
        self._require_cluster()
        return super().schedule()

    def delete(self, pod: str) -> None:
        """Delete one of gpu-lab's pods and wait until it is gone, as on the other backends."""
        self._require_cluster()
        super().delete(pod)
        ns, name = pod.split("/", 1) if "/" in pod else (self.namespace, pod)

        def gone() -> bool:
            try:
                self.client.get("Pod", name, namespace=ns)
            except NotFound:
                return True
            return False

        self._wait(gone, f'pod "{name}" to terminate')


def _plugin_pods(client: KubeClient, node: str) -> list[dict]:
    return client.list("Pod", namespace=NAMESPACE, field_selector=f"spec.nodeName={node}")["items"]


def _gpus_reported(client: KubeClient, node: str, expected: bool) -> bool:
    """The kubelet reports nvidia.com/* allocatable, above 0 (``expected``) or all at 0."""
    vals = list(device_allocatable(client.get("Node", node)).values())
    return bool(vals) and (any(vals) if expected else not any(vals))


def _pod_spec(doc: dict) -> dict | None:
    if doc.get("kind") == "Pod":
        return doc.get("spec")
    template = ((doc.get("spec") or {}).get("template") or {})
    return template.get("spec") if doc.get("kind") in ("Deployment", "ReplicaSet", "Job") else None


def placeholder(doc: dict) -> dict:
    """``doc`` with every container that is not gpu-lab's image running gpu-lab's image
    (a ``sleep`` that ends on SIGTERM, never pulled); requests, limits and everything else
    kept."""
    doc = copy.deepcopy(doc)
    spec = _pod_spec(doc)
    if not isinstance(spec, dict):
        return doc
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict) and c.get("image") != IMAGE:
                c["image"], c["imagePullPolicy"] = IMAGE, "Never"
                # PID 1 exits on SIGTERM, so a deleted pod goes at once (plain `sleep`
                # would sit out the 30 s grace period)
                c["command"] = (["sleep", "0"] if key == "initContainers" else
                                ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"])
                c.pop("args", None)
    return doc


def show_devices_pod(name: str = "show-devices", gpus: int = 1, resource: str = "nvidia.com/gpu") -> dict:
    """A pod that prints the ``NVIDIA_VISIBLE_DEVICES`` its container got (device plugin
    image, never pulled)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "show",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", 'echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"'],
                "resources": {"limits": {resource: gpus}},
            }],
        },
    }
