"""The commands that make a kind GPU lab, as data, and a runner that executes them.

Every step is an argv list, exactly what a person would type (``Step.shell()`` prints it),
so ``up`` can show the whole plan before running anything and tests can check it without
Docker. In order:

    docker info                                  the engine answers (preflight)
    kind version                                 kind is v0.33.0 or newer (preflight)
    docker image inspect ... <image>             the images of `gpu-lab kind build` exist
    kind create cluster --name N --config <lab>/kind-config.yaml --kubeconfig <lab>/kubeconfig
    kubectl --kubeconfig K -n kube-system scale deployment/coredns --replicas=0
    kind load docker-image gpu-lab/fake-device-plugin:<version> --name N
    kubectl --kubeconfig K wait --for=condition=Ready nodes --all --timeout=180s
    kubectl --kubeconfig K label nodes -l gpulab.dev/node=<node> --overwrite <GFD labels...>
    kubectl --kubeconfig K taint nodes -l gpulab.dev/node=<node> --overwrite <key=value:Effect...>
    kubectl --kubeconfig K apply -f <lab>/device-plugin.yaml
    kubectl --kubeconfig K -n gpu-lab-system rollout status daemonset/gpu-lab-device-plugin-<pool> --timeout=180s
    kubectl --kubeconfig K wait nodes -l gpulab.dev/pool=<pool> --for=jsonpath={.status.allocatable.nvidia\\.com/gpu}=8 --timeout=180s

The last step is the proof that the real kubelet registered the fake plugin: allocatable
``nvidia.com/*`` on every node of the pool equals what the simulator gives that node.
``kind create cluster --kubeconfig`` keeps the credentials in the lab's own folder;
``~/.kube/config`` is never touched. ``down`` is ``kind delete cluster --name N
--kubeconfig K`` and ``docker network rm gpu-lab-kind-N`` (each cluster gets its own network
through ``KIND_EXPERIMENTAL_DOCKER_NETWORK``, so nothing outlives it). ``kind`` and
``kubectl`` are taken from PATH, else from ``gpu-lab kind build``'s cache.

``Runner`` checks the tools first and stops with one line that names what is missing:
``docker not found on PATH ...``, ``no Docker engine: <what docker info said>``, ``kind
not found on PATH ...``, ``kind v0.29.0 is too old ...``, ``kubectl not found on PATH ...``.
A failing step stops the run with its exit code and last line of output; the full output
of every step goes to a log file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ...errors import KindError
from ...model.nodepool import POOL_LABEL
from .build import tool_path
from .config import KIND_MIN_VERSION, KIND_RELEASE, Worker
from .manifests import MANAGED_BY, NAMESPACE, NodePatch, daemonset_name

WAIT_TIMEOUT = "180s"
DOCKER_INFO_TIMEOUT_S = 30.0

INSTALL_HINTS = {
    "docker": "the kind backend needs Docker (https://docs.docker.com/get-docker/); "
    "without Docker use `gpu-lab up --backend local`",
    "kind": f"install kind {KIND_RELEASE} or newer "
    "(https://kind.sigs.k8s.io/docs/user/quick-start/#installation)",
    "kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
}


@dataclass(frozen=True)
class Step:
    """One command: its argv, a one-line description, and a timeout (None: none)."""

    argv: tuple[str, ...]
    what: str
    timeout: float | None = None

    def shell(self) -> str:
        return shlex.join(self.argv)


# ---------------------------------------------------------------------------- builders


def docker_info() -> Step:
    return Step(("docker", "info", "--format", "{{.ServerVersion}}"), "check the Docker engine",
                DOCKER_INFO_TIMEOUT_S)


def kind_version() -> Step:
    return Step(("kind", "version"), "check kind's version", 30.0)


def image_inspect(image: str) -> Step:
    return Step(("docker", "image", "inspect", "--format", "{{.Id}}", image),
                f"check that {image} is built", 60.0)


def kind_create(name: str, config: Path, kubeconfig: Path) -> Step:
    return Step(("kind", "create", "cluster", "--name", name, "--config", str(config),
                 "--kubeconfig", str(kubeconfig)),
                f"create the kind cluster {name!r} (one container per node)")


def kind_load(name: str, image: str) -> Step:
    return Step(("kind", "load", "docker-image", image, "--name", name),
                f"load {image} into the kind nodes")


def kind_get_clusters() -> Step:
    return Step(("kind", "get", "clusters"), "list kind clusters", 60.0)


def kind_delete(name: str, kubeconfig: Path) -> Step:
    return Step(("kind", "delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig)),
                f"delete the kind cluster {name!r}")


def kubectl(kubeconfig: Path, *args: str) -> tuple[str, ...]:
    return ("kubectl", "--kubeconfig", str(kubeconfig), *args)


def scale_coredns(kubeconfig: Path) -> Step:
    return Step(kubectl(kubeconfig, "-n", "kube-system", "scale", "deployment/coredns",
                        "--replicas=0"),
                "scale kubeadm's CoreDNS to 0 (no kube-proxy to reach the API server's Service; "
                "no GPU lesson needs cluster DNS)")


def wait_nodes_ready(kubeconfig: Path) -> Step:
    return Step(kubectl(kubeconfig, "wait", "--for=condition=Ready", "nodes", "--all",
                        f"--timeout={WAIT_TIMEOUT}"),
                "wait until every node is Ready")


def label_node(kubeconfig: Path, patch: NodePatch) -> Step:
    return Step(kubectl(kubeconfig, "label", "nodes", "-l", patch.selector, "--overwrite",
                        *patch.label_args()),
                f"label {patch.node}: {len(patch.labels)} labels kind cannot set at creation "
                "(GPU Feature Discovery's and the kubelet-refused)")


#: the kubelet's configuration file kubeadm writes on a node when it joins
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"


def kubelet_topology_policy(container: str, policy: str) -> Step:
    """Set the worker's ``topologyManagerPolicy`` in its kubelet's config and restart it (a
    fresh ``kubeadm join`` writes the file anew, so the next reshape starts from none)."""
    script = (f"sed -i '/^topologyManagerPolicy:/d' {KUBELET_CONFIG} && "
              f"echo 'topologyManagerPolicy: {policy}' >> {KUBELET_CONFIG} && systemctl restart kubelet")
    return Step(("docker", "exec", container, "sh", "-c", script),
                f"{container}'s kubelet: topologyManagerPolicy {policy} (restarted)", 60.0)


def taint_node(kubeconfig: Path, patch: NodePatch) -> Step:
    return Step(kubectl(kubeconfig, "taint", "nodes", "-l", patch.selector, "--overwrite",
                        *patch.taint_args()),
                f"taint {patch.node}")


def apply(kubeconfig: Path, manifests: Path) -> Step:
    return Step(kubectl(kubeconfig, "apply", "-f", str(manifests)),
                "deploy the fake device plugin (DaemonSet per GPU pool, ConfigMap of configs)")


def rollout_status(kubeconfig: Path, pool: str) -> Step:
    ds = daemonset_name(pool)
    return Step(kubectl(kubeconfig, "-n", NAMESPACE, "rollout", "status", f"daemonset/{ds}",
                        f"--timeout={WAIT_TIMEOUT}"),
                f"wait for the device plugin of pool {pool}")


def jsonpath_field(resource: str) -> str:
    """``nvidia.com/mig-1g.10gb`` -> ``nvidia\\.com/mig-1g\\.10gb`` (dots in a key escaped)."""
    return resource.replace(".", "\\.")


def wait_allocatable(kubeconfig: Path, pool: str, resource: str, count: int) -> Step:
    path = "{.status.allocatable." + jsonpath_field(resource) + "}"
    return Step(kubectl(kubeconfig, "wait", "nodes", "-l", f"{POOL_LABEL}={pool}",
                        f"--for=jsonpath={path}={count}", f"--timeout={WAIT_TIMEOUT}"),
                f"wait until the kubelet advertises {resource}={count} on pool {pool}")


def up_steps(
    name: str,
    *,
    image: str,
    config: Path,
    manifests: Path | None,
    kubeconfig: Path,
    patches: list[NodePatch],
    resources: dict[str, dict[str, int]],
    create: bool = True,
    topology_policies: dict[str, str] | None = None,
) -> list[Step]:
    """The whole ``up`` sequence after the preflight checks (the images are built by
    ``gpu-lab kind build``). ``topology_policies``: worker container -> the kubelet's
    ``topologyManagerPolicy``, for the workers whose node sets one.

    ``manifests`` is None when no pool has GPUs (nothing to load or deploy);
    ``create=False`` reuses a cluster that already exists."""
    plugin = manifests is not None
    steps: list[Step] = []
    if create:
        steps.append(kind_create(name, config, kubeconfig))
        steps.append(scale_coredns(kubeconfig))
    if plugin:
        steps.append(kind_load(name, image))
    steps += [kubelet_topology_policy(c, p) for c, p in sorted((topology_policies or {}).items())]
    steps.append(wait_nodes_ready(kubeconfig))
    for p in patches:
        if p.labels:
            steps.append(label_node(kubeconfig, p))
        if p.taints:
            steps.append(taint_node(kubeconfig, p))
    if manifests is not None:  # i.e. plugin
        steps.append(apply(kubeconfig, manifests))
        for pool in resources:
            steps.append(rollout_status(kubeconfig, pool))
        for pool, res in resources.items():
            for r, n in res.items():
                steps.append(wait_allocatable(kubeconfig, pool, r, n))
    return steps


#: kind's kubeadm configuration on every node: a worker joins with its JoinConfiguration
KUBEADM_CONFIG = "/kind/kubeadm.conf"


def reshape_steps(kubeconfig: Path, playing: dict[str, str], containers: list[str],
                  keep: list[Worker]) -> list[Step]:
    """Make the workers of a running cluster (``containers``; ``playing``: node name ->
    container, what they play now) the scenario's nodes ``keep``, as new machines joining:
    the device plugins go; every worker is reset (``kubeadm reset``: its kubelet stops, its
    state, device checkpoint and containers go); the old Nodes and the pods bound to them are
    deleted; each kept worker joins again (``kubeadm join``, about 2 s) under its scenario
    node's name and ``--node-labels``. Workers the scenario does not need stay reset: the API
    server knows only the scenario's nodes."""
    steps = [Step(kubectl(kubeconfig, "-n", NAMESPACE, "delete", "daemonset,configmap", "-l",
                          ",".join(f"{k}={v}" for k, v in MANAGED_BY.items()), "--cascade=foreground",
                          "--ignore-not-found", f"--timeout={WAIT_TIMEOUT}"),
                  "delete the device plugins of the last scenario (and wait for their pods)")]
    steps += [Step(("docker", "exec", c, "kubeadm", "reset", "--force"),
                   f"reset the worker {c} (its kubelet stops; its state and containers go)", 120.0)
              for c in containers]
    if playing:
        steps.append(Step(kubectl(kubeconfig, "delete", "nodes", *playing, "--ignore-not-found"),
                          "delete the workers' old Nodes"))
    steps += [Step(kubectl(kubeconfig, "delete", "pods", "--all-namespaces", "--field-selector",
                           f"spec.nodeName={n}", "--force", "--grace-period=0"),
                   f"delete the pods that were bound to {n}") for n in playing]
    for w in keep:
        labels = ",".join(f"{k}={v}" for k, v in w.kind_labels.items())
        # kind's own JoinConfiguration, with the scenario node's name and labels (the value
        # after "- name: node-labels": kind writes the labels in no fixed order)
        script = (f"sed -i -E 's/^  name: .*/  name: {w.node}/; "
                  f"/^  - name: node-labels$/{{n;s#^    value: .*#    value: {labels}#}}' {KUBEADM_CONFIG} "
                  f"&& kubeadm join --config {KUBEADM_CONFIG} --skip-phases=preflight")
        steps.append(Step(("docker", "exec", w.container, "sh", "-c", script),
                          f"join {w.container} as {w.node}", 180.0))
    steps.append(Step(kubectl(kubeconfig, "wait", "--for=create",
                              *[f"node/{w.node}" for w in keep], f"--timeout={WAIT_TIMEOUT}"),
                      "wait until the scenario's nodes have registered"))
    return steps


def network(name: str) -> str:
    """The Docker network of one gpu-lab kind cluster (kind's shared ``kind`` network would
    outlive ``down``; ``KIND_EXPERIMENTAL_DOCKER_NETWORK`` gives each cluster its own)."""
    return f"gpu-lab-kind-{name}"


def network_rm(name: str) -> Step:
    return Step(("docker", "network", "rm", network(name)),
                f"remove the cluster's Docker network {network(name)}", 60.0)


def down_steps(name: str, kubeconfig: Path) -> list[Step]:
    return [kind_delete(name, kubeconfig), network_rm(name)]


def script(steps: Iterable[Step]) -> str:
    """The steps as a shell script (comments say what each does)."""
    lines = ["#!/bin/sh", "# written by gpu-lab: what `gpu-lab up --backend kind` runs", "set -e"]
    for s in steps:
        lines += [f"# {s.what}", s.shell()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- running


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def parse_kind_version(text: str) -> tuple[int, int, int] | None:
    """``kind v0.33.0 go1.25.1 linux/amd64`` -> (0, 33, 0)."""
    m = re.search(r"\bv(\d+)\.(\d+)\.(\d+)", text or "")
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


Run = Callable[..., subprocess.CompletedProcess]


class Runner:
    """Runs steps as subprocesses; every failure is one ``KindError`` line.

    ``run`` and ``which`` are ``subprocess.run`` and ``shutil.which`` unless a test gives
    its own; ``log`` (a path) receives every step's full output."""

    def __init__(
        self,
        progress: Callable[[str], object] | None = print,
        run: Run = subprocess.run,
        which: Callable[[str], str | None] = shutil.which,
        log: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.progress = progress or (lambda _m: None)
        self._run = run
        self._which = which
        self.log = log
        self.env = env  # added to the environment of every command

    def resolve(self, tool: str) -> str | None:
        """``tool`` on PATH, else the one ``gpu-lab kind build`` left in the cache."""
        found = self._which(tool)
        if found or self._which is not shutil.which:
            return found

        cached = tool_path(tool)
        return str(cached) if cached else None

    def require(self, tool: str) -> str:
        path = self.resolve(tool)
        if not path:
            raise KindError(f"{tool} not found on PATH: {INSTALL_HINTS.get(tool, 'install it')}")
        return path

    def preflight(self, tools: Iterable[str] = ("docker", "kind", "kubectl")) -> None:
        """The tools exist and work: the Docker engine answers, kind is new enough."""
        tools = list(tools)
        if "docker" in tools:
            self.require("docker")
            res = self._call(docker_info(), check=False)
            if res.returncode != 0:
                why = _last_line(res.stderr) or _last_line(res.stdout) or f"exit {res.returncode}"
                raise KindError(f"no Docker engine: {why} (`docker info` failed; start Docker, "
                                "or use `gpu-lab up --backend local`)")
        if "kind" in tools:
            self.require("kind")
            res = self._call(kind_version(), check=False)
            found = parse_kind_version(res.stdout + res.stderr)
            if found is not None and found < KIND_MIN_VERSION:
                have = "v{}.{}.{}".format(*found)
                raise KindError(f"kind {have} is too old: gpu-lab's node image is built with kind "
                                f"{KIND_RELEASE}'s node files; `gpu-lab kind build` builds kind "
                                f"{KIND_RELEASE} (or put kind {KIND_RELEASE} or newer on PATH)")
        if "kubectl" in tools:
            self.require("kubectl")

    def _write_log(self, step: Step, res: subprocess.CompletedProcess | None, note: str = ""):
        if self.log is None:
            return
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as f:
            f.write(f"$ {step.shell()}\n")
            if res is not None:
                f.write((res.stdout or "") + (res.stderr or ""))
                f.write(f"[exit {res.returncode}]\n")
            if note:
                f.write(note + "\n")

    def _call(self, step: Step, check: bool = True) -> subprocess.CompletedProcess:
        try:
            argv = [self.resolve(step.argv[0]) or step.argv[0], *step.argv[1:]]
            extra = {"env": {**os.environ, **self.env}} if self.env else {}
            res = self._run(argv, capture_output=True, text=True,
                            timeout=step.timeout, stdin=subprocess.DEVNULL, **extra)
        except FileNotFoundError:
            raise KindError(f"{step.argv[0]} not found on PATH: "
                            f"{INSTALL_HINTS.get(step.argv[0], 'install it')}") from None
        except subprocess.TimeoutExpired:
            self._write_log(step, None, f"[timed out after {step.timeout:g} s]")
            if step.argv[:2] == ("docker", "info"):
                raise KindError(f"no Docker engine: `docker info` did not answer in "
                                f"{step.timeout:g} s") from None
            raise KindError(f"`{step.shell()}` did not finish in {step.timeout:g} s") from None
        self._write_log(step, res)
        if check and res.returncode != 0:
            why = _last_line(res.stderr) or _last_line(res.stdout)
            where = f" (full output: {self.log})" if self.log else ""
            cmd = " ".join(step.argv[:3])
            raise KindError(f"`{cmd} ...` failed (exit {res.returncode}): {why}{where}")
        return res

    def run(self, step: Step) -> subprocess.CompletedProcess:
        self.progress(f"  {step.what}\n    $ {step.shell()}")
        return self._call(step)

    def output(self, step: Step) -> str:
        """Run a read-only step quietly and return its stdout."""
        return self._call(step).stdout

    def execute(self, steps: Iterable[Step]) -> None:
        for s in steps:
            self.run(s)
