"""``KindCluster(name).up(scenario)``: a kind cluster shaped like a scenario's nodes, with
the fake NVIDIA device plugin registered with each GPU node's real kubelet.

    lab = KindCluster("gpu-lab")
    plan = lab.plan("lessons/scenarios/first_cluster.yaml")   # nothing runs; no Docker needed
    print(plan.script())                                       # the exact commands
    lab.up("lessons/scenarios/first_cluster.yaml")             # runs them (needs Docker, kind, kubectl)
    lab.kubeconfig()                                           # <lab>/kubeconfig
    lab.down()

Everything the lab writes lives in ``$GPU_LAB_HOME/kind/<name>/`` (``kind-config.yaml``,
``device-plugin.yaml``, ``up.sh``, ``kubeconfig``, ``up.log``); ``~/.kube/config`` is never
touched. ``up`` only shapes the cluster (nodes, labels, taints, device plugin); creating the
scenario's workloads is the session's job, as for the local backend.

Workers register under the scenario's node names (their containers keep kind's names,
``<name>-worker``, ``<name>-worker2``, ...), so the fake plugin derives the same GPU UUIDs as
on every other backend. What differs from the simulator, by construction: a node's CPU, memory
and pod capacity are the Docker host's, not the scenario's; the control-plane node exists
(tainted ``node-role.kubernetes.io/control-plane:NoSchedule``, as kind leaves it). The images
come from ``gpu-lab kind build``; ``up`` says so in one line when they are missing.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...errors import KindError
from ...model.scenario import Scenario, load_scenario
from ..local.cluster import default_home as home
from . import commands as cmd
from . import config as kc
from . import manifests as mf

Progress = Callable[[str], object] | None


def default_repo() -> Path:
    """The source tree this package runs from (the plugin image is built from it)."""
    return Path(__file__).resolve().parents[3]


def default_home() -> Path:

    return home()


@dataclass
class KindPlan:
    """Everything ``up`` would write and run, computed without touching Docker."""

    name: str
    workers: list[kc.Worker]
    config: dict[str, Any]
    manifests: list[dict[str, Any]]
    patches: list[mf.NodePatch]
    resources: dict[str, dict[str, int]]  # pool -> {resource: count per node}
    paths: dict[str, Path]
    repo: Path
    image: str
    warnings: list[str] = field(default_factory=list)
    #: on a cluster that exists: the steps that make its workers this scenario's nodes
    reshape: list[cmd.Step] = field(default_factory=list)

    @property
    def config_text(self) -> str:
        return kc.dump(self.config)

    @property
    def manifests_text(self) -> str | None:
        return mf.dump_all(self.manifests) if self.manifests else None

    def steps(self, create: bool = True) -> list[cmd.Step]:
        return ([] if create else self.reshape) + cmd.up_steps(
            self.name,
            image=self.image,
            config=self.paths["config"],
            manifests=self.paths["manifests"] if self.manifests else None,
            kubeconfig=self.paths["kubeconfig"],
            patches=self.patches,
            resources=self.resources,
            create=create,
            topology_policies={w.container: w.record.topology_manager_policy for w in self.workers
                               if w.record is not None and w.record.topology_manager_policy != "none"},
        )

    def script(self, create: bool = True) -> str:
        preflight = [cmd.docker_info(), cmd.kind_version()]
        return cmd.script(preflight + self.steps(create))

    def containers(self) -> dict[str, str]:
        """Scenario node name (also the Kubernetes node's) -> the container kind runs it in."""
        return {w.node: w.container for w in self.workers}

    def write(self) -> None:
        """Write the kind config, the manifests and ``up.sh`` into the lab folder."""
        d = self.paths["dir"]
        d.mkdir(parents=True, exist_ok=True)
        self.paths["config"].write_text(self.config_text)
        if self.manifests_text is not None:
            self.paths["manifests"].write_text(self.manifests_text)
        else:
            self.paths["manifests"].unlink(missing_ok=True)
        self.paths["script"].write_text(self.script())


def _playing_of(workers: list[kc.Worker]) -> dict[str, dict[str, Any]]:
    return {w.node: {"container": w.container, "labels": dict(w.kind_labels)} for w in workers}


class KindCluster:
    """A named kind GPU lab; nothing runs until :meth:`up`."""

    def __init__(
        self,
        name: str = kc.DEFAULT_NAME,
        root: Path | str | None = None,
        *,
        image: str = mf.IMAGE,
        node_image: str = kc.NODE_IMAGE,
        repo: Path | str | None = None,
        runner: cmd.Runner | None = None,
        max_workers: int = kc.MAX_WORKERS,
    ):
        self.name = kc.check_name(name)
        home = Path(root).expanduser() if root is not None else default_home()
        self.dir = (home / "kind" / name).absolute()
        self.image = image
        self.node_image = node_image
        self.repo = Path(repo) if repo is not None else default_repo()
        self._runner = runner
        self.max_workers = max_workers

    def __repr__(self) -> str:
        return f"KindCluster(name={self.name!r}, dir={str(self.dir)!r})"

    # ------------------------------------------------------------------ paths

    @property
    def paths(self) -> dict[str, Path]:
        return {
            "dir": self.dir,
            "config": self.dir / "kind-config.yaml",
            "manifests": self.dir / "device-plugin.yaml",
            "script": self.dir / "up.sh",
            "kubeconfig": self.dir / "kubeconfig",
            "log": self.dir / "up.log",
            "playing": self.dir / "nodes.yaml",  # the workers' nodes now (reshape)
        }

    def kubeconfig(self) -> Path:
        return self.paths["kubeconfig"]

    def containers_of_nodes(self) -> dict[str, str]:
        """Kubernetes node name -> the Docker container kind runs it in: what the last ``up``
        made the workers play (kind numbers its worker containers in config order; empty
        before the first)."""
        if not self.paths["config"].exists():
            return {}
        control_plane, _ = kc.kind_node_names(self.name, 0)
        # the control plane registers under its own name
        return {control_plane: control_plane,
                **{n: p["container"] for n, p in self._playing().items()}}

    def runner(self, progress: Progress = print) -> cmd.Runner:
        if self._runner is not None:
            return self._runner
        return cmd.Runner(progress=progress, log=self.paths["log"],
                          env={"KIND_EXPERIMENTAL_DOCKER_NETWORK": cmd.network(self.name)})

    # ------------------------------------------------------------------ plan

    def plan(self, scenario: Scenario | Any, made: dict[str, Any] | None = None,
             containers: dict[str, str] | None = None) -> KindPlan:
        """What ``up`` would do for ``scenario`` (a Scenario, or YAML text, path, dicts).

        ``made`` and ``containers``: the kind config of the running cluster and the worker
        container each scenario node goes to (``up`` reshapes it); the config stays that one."""
        sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        if not sc.nodes:
            raise KindError("the scenario has no Nodes or NodePools: nothing to make kind "
                            "workers of")
        if len(sc.nodes) > self.max_workers:
            raise KindError(
                f"the scenario has {len(sc.nodes)} nodes; kind runs one container per node "
                f"(about 0.5 GB of memory each) and gpu-lab stops at {self.max_workers}: use "
                "`gpu-lab up --backend local` for bigger clusters"
            )
        workers = kc.plan_workers(self.name, sc.nodes, containers)
        warnings = []
        for w in workers:
            rec = w.record
            if w.pool is None and rec is not None and any(
                r.startswith("nvidia.com/") for r in rec.capacity
            ):
                warnings.append(
                    f"Node {w.node}: a plain Node gets no device plugin on kind, so its "
                    "nvidia.com/* capacity is not reproduced (describe it as a NodePool)"
                )
        return KindPlan(
            name=self.name,
            workers=workers,
            config=made if made is not None else kc.kind_config(self.name, workers, self.node_image),
            manifests=mf.device_plugin_manifests(workers, self.image),
            patches=mf.node_patches(workers),
            resources=mf.gpu_resources(workers),
            paths=self.paths,
            repo=self.repo,
            image=self.image,
            warnings=warnings,
        )

    # ------------------------------------------------------------------ lifecycle

    def exists(self, runner: cmd.Runner | None = None) -> bool:
        """Whether kind lists a cluster of this name (needs kind and Docker)."""
        out = (runner or self.runner(None)).output(cmd.kind_get_clusters())
        return self.name in {ln.strip() for ln in out.splitlines()}

    def up(self, scenario: Scenario | Any, progress: Progress = print) -> KindPlan:
        """Create (or reuse) the cluster, load the plugin image, label and taint the nodes,
        deploy the plugin and wait until every GPU node advertises its GPUs. A failed
        creation deletes the half-made cluster.

        A cluster that exists is reused as it is when its workers play the scenario's nodes
        already, and reshaped when they play others (``commands.reshape_steps``: the workers
        join again as the scenario's nodes, in seconds; the pods on them go). A scenario with
        more nodes than the cluster has workers needs a new cluster (``down`` first)."""
        say = progress or (lambda _m: None)
        plan = self.plan(scenario)
        runner = self.runner(progress)
        runner.preflight()
        needed = [self.node_image] + ([self.image] if plan.manifests else [])
        missing = [i for i in needed if runner._call(cmd.image_inspect(i), check=False).returncode]
        if missing:
            raise KindError(f"image {', '.join(missing)} not built yet: run `gpu-lab kind build` "
                            "(about 2 minutes once the control plane is built)")
        exists = self.exists(runner)
        reshape: list[cmd.Step] = []
        if exists:
            made = self._made_config(plan)
            playing = self._playing()
            containers = self._placement(plan, made, playing)
            plan = self.plan(scenario, made, containers)
            if playing != _playing_of(plan.workers):
                workers = list(kc.configured_workers(made).values())
                reshape = cmd.reshape_steps(self.kubeconfig(),
                                            {n: p["container"] for n, p in playing.items()},
                                            workers, plan.workers)
                say(f"kind cluster {self.name!r} exists: reshaping it for this scenario "
                    f"({len(plan.workers)} of its {len(workers)} workers join as its nodes; "
                    "the pods on them go)")
            else:
                say(f"kind cluster {self.name!r} exists: reusing it")
        for w in plan.warnings:
            say(f"warning: {w}")
        plan.reshape = reshape
        if not exists:
            self.paths["playing"].unlink(missing_ok=True)  # of a cluster deleted earlier
        plan.write()
        say(f"kind cluster {self.name!r}: {len(plan.workers)} workers "
            f"({', '.join(f'{w.node} in {w.container}' for w in plan.workers)})")
        try:
            runner.execute(plan.steps(create=not exists))
        except (KindError, KeyboardInterrupt):
            if not exists:  # never leave a half-made cluster behind
                say(f"kind cluster {self.name!r} did not come up: deleting it")
                with contextlib.suppress(KindError):
                    runner.execute(cmd.down_steps(self.name, self.kubeconfig()))
            elif reshape:  # half reshaped: say so, and the next up reshapes it again
                self._write_playing({n: {**p, "labels": {}} for n, p in _playing_of(plan.workers).items()})
            raise
        self._write_playing(_playing_of(plan.workers))
        say(f"kind cluster {self.name!r} ready; kubeconfig: {self.kubeconfig()}")
        return plan

    def _made_config(self, plan: KindPlan) -> dict[str, Any]:
        """The running cluster's kind config, or one line saying why ``plan`` cannot use it."""
        old = self.paths["config"].read_text() if self.paths["config"].exists() else None
        if old is None:
            raise KindError(f"a kind cluster {self.name!r} exists but gpu-lab did not make "
                            f"it (no {self.paths['config']}): pick another --name")
        made = yaml.safe_load(old) or {}
        down = f"run `gpu-lab down --backend kind --name {self.name}` first"
        if kc.frame(made) != kc.frame(plan.config):
            # made by an earlier gpu-lab (e.g. before its scheduler logged scores)
            raise KindError(f"the kind cluster {self.name!r} was made with an older gpu-lab's "
                            f"kind config: {down}")
        workers = kc.configured_workers(made)
        if len(plan.workers) > len(workers):
            raise KindError(f"the kind cluster {self.name!r} has {len(workers)} workers and this "
                            f"scenario {len(plan.workers)} nodes (kind cannot add workers to a "
                            f"cluster): {down}")
        return made

    @staticmethod
    def _placement(plan: KindPlan, made: dict[str, Any],
                   playing: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Scenario node -> worker container: a node some worker plays already stays there,
        the others take the free workers in order."""
        placed = {w.node: playing[w.node]["container"] for w in plan.workers if w.node in playing}
        free = [c for c in kc.configured_workers(made).values() if c not in placed.values()]
        return {w.node: placed.get(w.node) or free.pop(0) for w in plan.workers}

    def _playing(self) -> dict[str, dict[str, Any]]:
        """Node name -> {container, labels} of the workers that play a node now: what the last
        ``up`` registered (every worker of the config, as made, if it never reshaped)."""
        path = self.paths["playing"]
        if path.exists():
            return yaml.safe_load(path.read_text()) or {}
        if not self.paths["config"].exists():
            return {}
        made = yaml.safe_load(self.paths["config"].read_text()) or {}
        labels = kc.configured_labels(made)
        return {n: {"container": c, "labels": labels.get(n, {})}
                for n, c in kc.configured_workers(made).items()}

    def _write_playing(self, playing: dict[str, dict[str, Any]]) -> None:
        self.paths["playing"].write_text(yaml.safe_dump(playing, sort_keys=False))

    def down(self, progress: Progress = print, purge: bool = False) -> bool:
        """Delete the kind cluster; ``purge`` also deletes the lab folder. Returns whether a
        cluster was deleted."""
        say = progress or (lambda _m: None)
        runner = self.runner(progress)
        runner.preflight(("docker", "kind"))
        deleted = False
        if self.exists(runner):
            delete, net = cmd.down_steps(self.name, self.kubeconfig())
            runner.run(delete)
            runner._call(net, check=False)  # absent when kind used an existing network
            deleted = True
            say(f"kind cluster {self.name!r} deleted")
        else:
            say(f"no kind cluster {self.name!r}")
        if purge and self.dir.exists():
            if self.dir.parent.name != "kind":
                raise KindError(f"refusing to delete {self.dir}: not a gpu-lab kind lab folder")
            shutil.rmtree(self.dir)
        return deleted
