"""The kind backend up to the docker/kind boundary.

Nothing here talks to Docker or creates a kind cluster (``test_kind_cluster`` does, marker
``kind``). What is checked instead: the generated kind config and manifests (structure,
labels, node names, per-pool plugin arguments, NVIDIA's config format, and that those
arguments make the plugin advertise what the scenario's node has), the exact
docker/kind/kubectl argv, the one-line errors when a tool, the Docker engine or an image of
``gpu-lab kind build`` is missing, the clean-up of a failed creation, the device-plugin
image's requirements and entrypoint, and, on the real local control plane (marker
``controlplane``), that every generated object passes server-side dry-run and the kubectl
steps are accepted by a real API server.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from fleets import A100_MIXED_MIG, sized
from realcluster import require_controlplane

from gpu_lab.backends.kind import KindCluster, KindError
from gpu_lab.backends.kind import build as kb
from gpu_lab.backends.kind import commands as cmd
from gpu_lab.backends.kind import config as kc
from gpu_lab.backends.kind import manifests as mf
from gpu_lab.backends.kubeconfig import OWNED_LABEL
from gpu_lab.backends.local import build as cpbuild
from gpu_lab.deviceplugin.config import load_config, parse_config
from gpu_lab.deviceplugin.plugin import FakeDevicePlugin, build_parser
from gpu_lab.model.scenario import load_scenario

REPO = Path(__file__).resolve().parents[3]
LINUX = sys.platform.startswith("linux")

SCENARIO = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 2
  gpu: {model: H100-80GB, count: 8}
  cpu: "96"
  memory: 1024Gi
  instanceType: p5.48xlarge
  labels: {team: ml, node-role.kubernetes.io/gpu: "", topology.kubernetes.io/zone: us-east-1a}
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  devicePlugin: {version: v1, flags: {migStrategy: none}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: t4}
spec:
  count: 1
  gpu: {model: T4, count: 1}
  cpu: "8"
  memory: 32Gi
  taints: [{key: dedicated, effect: PreferNoSchedule}]
  devicePlugin:
    version: v1
    sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}
---
""" + sized(A100_MIXED_MIG, "32", "256Gi") + """---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h200}
spec:
  count: 1
  gpu: {model: H200-141GB, count: 1}
  cpu: "32"
  memory: 256Gi
  devicePlugin: {version: v1, flags: {migStrategy: single}}
  mig:
    config: sevens
    migParted:
      version: v1
      mig-configs:
        sevens:
        - devices: all
          mig-enabled: true
          mig-devices: {"1g.18gb": 7}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec:
  count: 1
  gpu: {model: L4, count: 2}
  cpu: "16"
  memory: 64Gi
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {count: 1, cpu: "16", memory: 64Gi}
"""
NAME = "gpu-lab-t"


@pytest.fixture(scope="module")
def scenario():
    return load_scenario(SCENARIO)


@pytest.fixture(scope="module")
def plan(scenario, tmp_path_factory):
    return KindCluster(NAME, root=tmp_path_factory.mktemp("home"), repo=REPO).plan(scenario)


def _by_node(plan) -> dict:
    return {w.node: w for w in plan.workers}


def _daemonsets(plan) -> dict:
    return {
        o["metadata"]["name"].removeprefix(mf.APP + "-"): o
        for o in plan.manifests
        if o["kind"] == "DaemonSet"
    }


# =========================================================================== kind config


def test_kind_config_is_one_control_plane_and_one_worker_per_node(plan, scenario):
    cfg = plan.config
    assert cfg["kind"] == "Cluster"
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert cfg["name"] == NAME
    roles = [n["role"] for n in cfg["nodes"]]
    assert roles == ["control-plane"] + ["worker"] * len(scenario.nodes)
    assert {n["image"] for n in cfg["nodes"]} == {kc.NODE_IMAGE}
    assert set(cfg["nodes"][0]) == {"role", "image"}
    assert all(set(n) == {"role", "image", "labels", "kubeadmConfigPatches"}
               for n in cfg["nodes"][1:])
    assert [n["labels"][kc.NODE_LABEL] for n in cfg["nodes"][1:]] == [n.name for n in scenario.nodes]
    assert yaml.safe_load(plan.config_text) == cfg


def test_kind_config_runs_without_kube_proxy_or_cni_daemon_on_cgroup_v1_too(plan):
    cfg = plan.config
    assert cfg["networking"] == {"disableDefaultCNI": True, "kubeProxyMode": "none"}
    assert [yaml.safe_load(p) for p in cfg["kubeadmConfigPatches"]][0] == {
        "kind": "KubeletConfiguration", "failCgroupV1": False}
    assert list(cfg) == ["kind", "apiVersion", "name", "networking", "kubeadmConfigPatches",
                         "nodes"]


def test_kubeadms_scheduler_logs_its_scores_with_the_local_backends_vmodule(plan):
    """kubeadm v1beta4's scheduler.extraArgs (a list of name/value pairs) carry the very flag
    the local control plane gives kube-scheduler, so explain reads scores on kind too."""
    from gpu_lab.backends.local.flags import SCORE_LOG_VMODULE

    patch = yaml.safe_load(plan.config["kubeadmConfigPatches"][1])
    assert patch == {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
                     "scheduler": {"extraArgs": [{"name": "vmodule", "value": "schedule_one=10,batch=3"}]}}
    (arg,) = patch["scheduler"]["extraArgs"]
    assert f"--{arg['name']}={arg['value']}" == SCORE_LOG_VMODULE


def test_each_worker_registers_under_its_scenario_node_name(plan, scenario):
    """A JoinConfiguration patch per worker sets the Kubernetes node name (kubeadm's
    nodeRegistration.name): pods land on ``h100-0`` on kind as on every other backend."""
    workers = plan.config["nodes"][1:]
    for n, node in zip(workers, scenario.nodes):
        (patch,) = n["kubeadmConfigPatches"]
        assert yaml.safe_load(patch) == {
            "kind": "JoinConfiguration", "nodeRegistration": {"name": node.name}
        }
    assert [w.node for w in plan.workers] == [n.name for n in scenario.nodes]


def test_node_image_is_gpu_labs_own_v1_37_2_build():
    assert kc.NODE_IMAGE == "gpu-lab/kind-node:v1.37.2"
    assert kc.NODE_IMAGE == kb.NODE_IMAGE  # what `gpu-lab kind build` makes
    assert kc.KUBERNETES_VERSION == kb.KUBERNETES_VERSION == cpbuild.DEFAULT_VERSION
    assert kc.KIND_MIN_VERSION == (0, 33, 0) and kc.KIND_RELEASE == "v0.33.0"


def test_worker_names_follow_kinds_node_namer(plan):
    cp, workers = kc.kind_node_names("lab", 3)
    assert cp == "lab-control-plane"
    assert workers == ["lab-worker", "lab-worker2", "lab-worker3"]
    assert plan.containers() == {
        "h100-0": f"{NAME}-worker", "h100-1": f"{NAME}-worker2", "t4-0": f"{NAME}-worker3",
        "a100-0": f"{NAME}-worker4", "h200-0": f"{NAME}-worker5", "l4-0": f"{NAME}-worker6",
        "cpu-0": f"{NAME}-worker7",
    }  # fmt: skip


def test_kind_labels_are_those_the_kubelet_accepts_the_rest_is_patched(plan, scenario):
    h100 = _by_node(plan)["h100-0"]
    assert h100.kind_labels == {
        "gpulab.dev/node": "h100-0",
        "gpulab.dev/owned": "true",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "team": "ml",
        "topology.kubernetes.io/zone": "us-east-1a",
        "gpulab.dev/pool": "h100",
    }
    assert h100.patch_labels["node-role.kubernetes.io/gpu"] == ""  # the kubelet refuses it
    assert h100.patch_labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    for w, node in zip(plan.workers, scenario.nodes):
        assert not any(k.startswith("nvidia.com/") for k in w.kind_labels)
        assert all(kc.kubelet_accepts_label(k) for k in w.kind_labels)
        assert not set(w.kind_labels) & set(w.patch_labels)
        own = set(kc.KUBELET_OWN_LABELS)
        assert not (set(w.kind_labels) | set(w.patch_labels)) & own
        merged = {**w.kind_labels, **w.patch_labels}
        merged.pop(kc.NODE_LABEL)
        assert merged.pop(OWNED_LABEL) == "true"  # gpu-lab may change the node (sessions)
        assert merged == {k: v for k, v in node.labels.items() if k not in own}


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("gpulab.dev/pool", True),
        ("team", True),
        ("nvidia.com/gpu.product", True),
        ("node.kubernetes.io/instance-type", True),
        ("topology.kubernetes.io/zone", True),
        ("kubernetes.io/arch", True),
        ("kubelet.kubernetes.io/x", True),
        ("example.node.kubernetes.io/x", True),
        ("node-role.kubernetes.io/gpu", False),
        ("node-restriction.kubernetes.io/pool", False),
        ("kubernetes.io/role", False),
        ("k8s.io/x", False),
        ("foo.k8s.io/x", False),
    ],
)
def test_kubelet_node_labels_rule(key, ok):
    assert kc.kubelet_accepts_label(key) is ok


@pytest.mark.parametrize("name", ["", "Lab", "-lab", "lab_1", "a" * 41, "lab/x"])
def test_bad_cluster_names_are_refused(name):
    with pytest.raises(KindError, match="invalid kind cluster name"):
        KindCluster(name)


# =========================================================================== manifests


def test_one_daemonset_per_gpu_pool_selecting_its_nodes(plan):
    ds = _daemonsets(plan)
    assert list(ds) == ["h100", "t4", "a100", "h200", "l4"]  # the cpu pool has no plugin
    for pool, obj in ds.items():
        assert obj["metadata"]["namespace"] == mf.NAMESPACE
        tmpl = obj["spec"]["template"]
        assert obj["spec"]["selector"]["matchLabels"] == tmpl["metadata"]["labels"]
        spec = tmpl["spec"]
        assert spec["nodeSelector"] == {"gpulab.dev/pool": pool}
        assert spec["tolerations"] == [{"operator": "Exists"}]
        assert spec["priorityClassName"] == "system-node-critical"
        assert spec["automountServiceAccountToken"] is False
        (c,) = spec["containers"]
        assert c["image"] == f"gpu-lab/fake-device-plugin:{__import__('gpu_lab').__version__}"
        assert c["imagePullPolicy"] == "IfNotPresent"
        assert c["env"] == [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
        ]
        vols = {v["name"]: v for v in spec["volumes"]}
        assert vols["device-plugins"]["hostPath"] == {
            "path": "/var/lib/kubelet/device-plugins", "type": "Directory"
        }
        assert vols["config"]["configMap"] == {
            "name": mf.CONFIG_MAP, "items": [{"key": pool, "path": "config.yaml"}]
        }
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert mounts["device-plugins"] == "/var/lib/kubelet/device-plugins"
    kinds = [o["kind"] for o in plan.manifests]
    assert kinds == ["Namespace", "ConfigMap", "ConfigMap"] + ["DaemonSet"] * 5
    assert "ServiceAccount" not in kinds and "ClusterRole" not in kinds  # no RBAC needed


def test_plugin_args_per_pool(plan):
    args = {p: o["spec"]["template"]["spec"]["containers"][0]["args"]
            for p, o in _daemonsets(plan).items()}
    base = ["--config", "/etc/gpu-lab/device-plugin/config.yaml",
            "--plugin-dir", "/var/lib/kubelet/device-plugins"]
    assert args == {
        "h100": ["--model", "H100-80GB", "--gpus", "8", *base],
        "t4": ["--model", "T4", "--gpus", "1", *base],
        "a100": ["--model", "A100-40GB", "--gpus", "2", *base, "--mig-config", "all-balanced"],
        "h200": ["--model", "H200-141GB", "--gpus", "1", *base,
                 "--mig-config", "/etc/gpu-lab/mig-parted/config.yaml",
                 "--mig-config-name", "sevens"],
        "l4": ["--model", "L4", "--gpus", "2", *base],
    }  # fmt: skip
    for a in args.values():
        build_parser().parse_args(a)  # the plugin's own parser takes them


def test_config_map_holds_nvidias_config_per_pool(plan, scenario):
    (cm,) = [o for o in plan.manifests if o["metadata"]["name"] == mf.CONFIG_MAP]
    pools = {p["metadata"]["name"]: p["spec"] for p in scenario.node_pools}
    assert list(cm["data"]) == ["h100", "t4", "a100", "h200", "l4"]
    for pool, text in cm["data"].items():
        assert yaml.safe_load(text) == (pools[pool].get("devicePlugin") or {"version": "v1"})
        parse_config(yaml.safe_load(text), pool)  # NVIDIA's format, as the plugin reads it
    assert yaml.safe_load(cm["data"]["t4"])["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}
    ]


def test_mig_parted_config_map_only_for_pools_with_their_own_file(plan, scenario):
    (cm,) = [o for o in plan.manifests if o["metadata"]["name"] == mf.MIG_PARTED_CONFIG_MAP]
    assert list(cm["data"]) == ["h200"]
    h200 = next(p for p in scenario.node_pools if p["metadata"]["name"] == "h200")
    assert yaml.safe_load(cm["data"]["h200"]) == h200["spec"]["mig"]["migParted"]
    vols = _daemonsets(plan)["h200"]["spec"]["template"]["spec"]["volumes"]
    assert {v["name"] for v in vols} == {"device-plugins", "config", "mig-parted"}
    assert "mig-parted" not in {
        v["name"] for v in _daemonsets(plan)["a100"]["spec"]["template"]["spec"]["volumes"]
    }


@pytest.mark.parametrize("pool", ["h100", "t4", "a100", "h200", "l4"])
def test_daemonset_makes_the_plugin_advertise_the_scenario_node(plan, scenario, pool, tmp_path):
    """Play the container: mount the ConfigMaps where the DaemonSet mounts them, parse its
    args with the plugin's parser, build the plugin. It serves the node's devices."""
    ds = _daemonsets(plan)[pool]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    files = {}
    for o in plan.manifests:
        if o["kind"] == "ConfigMap" and pool in o["data"]:
            where = mf.CONFIG_DIR if o["metadata"]["name"] == mf.CONFIG_MAP else mf.MIG_PARTED_DIR
            path = tmp_path / where.strip("/") / "config.yaml"
            path.parent.mkdir(parents=True)
            path.write_text(o["data"][pool])
            files[f"{where}/config.yaml"] = str(path)
    args = [files.get(a, a) for a in args]
    ns = build_parser().parse_args(args)
    node = next(n for n in scenario.nodes if n.pool == pool)
    fake = FakeDevicePlugin(ns.model, ns.gpus, load_config(ns.config), tmp_path / "dp",
                            node.name, mig_config=ns.mig_config,
                            mig_config_name=ns.mig_config_name)
    assert fake.devices == node.devices
    assert {r: len(ids) for r, ids in fake.devices.items()} == plan.resources[pool]
    assert plan.resources[pool] == {
        r: n for r, n in node.allocatable.items() if r.startswith("nvidia.com/")
    }


def test_node_patches_carry_gfd_labels_and_taints(plan, scenario):
    patches = {p.node: p for p in plan.patches}
    assert "cpu-0" not in patches  # nothing kind could not set itself
    h100 = patches["h100-0"]
    assert h100.selector == "gpulab.dev/node=h100-0"
    node = next(n for n in scenario.nodes if n.name == "h100-0")
    gfd = {k: v for k, v in node.labels.items() if k.startswith("nvidia.com/")}
    assert h100.labels == {**gfd, "node-role.kubernetes.io/gpu": ""}
    assert "node-role.kubernetes.io/gpu=" in h100.label_args()
    assert "nvidia.com/gpu.count=8" in h100.label_args()
    assert h100.taint_args() == ["nvidia.com/gpu=present:NoSchedule"]
    assert patches["t4-0"].taint_args() == ["dedicated:PreferNoSchedule"]
    assert patches["a100-0"].labels["nvidia.com/mig.config"] == "all-balanced"
    assert patches["a100-0"].labels["nvidia.com/mig.strategy"] == "mixed"


def test_merge_patch_keeps_other_taints_like_kubectl_taint_overwrite(plan):
    p = next(p for p in plan.patches if p.node == "h100-0")
    live = {"spec": {"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"},
    ]}}  # fmt: skip
    patch = p.merge_patch(live)
    assert patch["spec"]["taints"] == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"},
    ]
    assert patch["metadata"]["labels"] == p.labels


def test_scenario_without_gpus_deploys_nothing(tmp_path):
    plan = KindCluster("cpu", root=tmp_path).plan(
        "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: c}\n"
        "spec: {count: 2, cpu: '4', memory: 8Gi}\n"
    )
    assert plan.manifests == [] and plan.manifests_text is None
    k = str(tmp_path / "kind" / "cpu" / "kubeconfig")
    assert [list(s.argv) for s in plan.steps()] == [
        ["kind", "create", "cluster", "--name", "cpu", "--config",
         str(tmp_path / "kind" / "cpu" / "kind-config.yaml"), "--kubeconfig", k],
        ["kubectl", "--kubeconfig", k, "-n", "kube-system", "scale", "deployment/coredns",
         "--replicas=0"],
        ["kubectl", "--kubeconfig", k, "wait", "--for=condition=Ready", "nodes", "--all",
         "--timeout=180s"],
    ]  # fmt: skip


def test_plain_gpu_node_is_a_worker_with_a_warning(tmp_path):
    plan = KindCluster("plain", root=tmp_path).plan(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {zone: a}}\n"
        "status: {capacity: {cpu: '8', memory: 16Gi, nvidia.com/gpu: '2'}}\n"
    )
    (w,) = plan.workers
    assert w.kind_labels == {"gpulab.dev/node": "n1", "gpulab.dev/owned": "true", "zone": "a"}
    assert (w.node, w.container) == ("n1", "plain-worker")
    assert plan.manifests == []
    assert plan.warnings and "n1" in plan.warnings[0] and "NodePool" in plan.warnings[0]


def test_too_many_or_no_nodes_are_refused(tmp_path):
    with pytest.raises(KindError, match="13 nodes; kind runs one container per node"):
        KindCluster("big", root=tmp_path).plan(
            "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: c}\n"
            "spec: {count: 13, cpu: '4', memory: 8Gi}\n"
        )
    with pytest.raises(KindError, match="no Nodes or NodePools"):
        KindCluster("none", root=tmp_path).plan(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {containers: [{name: c, image: x}]}\n"
        )


# =========================================================================== commands


def test_up_steps_exact_argv(tmp_path):
    lab = KindCluster("demo", root=tmp_path, repo=REPO)
    plan = lab.plan(
        "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: a100}\n"
        "spec:\n  count: 1\n  gpu: {model: A100-40GB, count: 2}\n  cpu: '8'\n  memory: 32Gi\n"
        "  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n"
        "  devicePlugin: {version: v1, flags: {migStrategy: mixed}}\n"
        "  mig: {config: all-3g.20gb}\n"
    )
    d = tmp_path / "kind" / "demo"
    k = str(d / "kubeconfig")
    image = mf.IMAGE
    (patch,) = plan.patches
    labels = patch.label_args()
    assert labels == [f"{k}={v}" for k, v in patch.labels.items()]
    assert "nvidia.com/mig.config=all-3g.20gb" in labels
    assert [list(s.argv) for s in plan.steps()] == [
        ["kind", "create", "cluster", "--name", "demo", "--config", str(d / "kind-config.yaml"),
         "--kubeconfig", k],
        ["kubectl", "--kubeconfig", k, "-n", "kube-system", "scale", "deployment/coredns",
         "--replicas=0"],
        ["kind", "load", "docker-image", image, "--name", "demo"],
        ["kubectl", "--kubeconfig", k, "wait", "--for=condition=Ready", "nodes", "--all",
         "--timeout=180s"],
        ["kubectl", "--kubeconfig", k, "label", "nodes", "-l", "gpulab.dev/node=a100-0",
         "--overwrite", *labels],
        ["kubectl", "--kubeconfig", k, "taint", "nodes", "-l", "gpulab.dev/node=a100-0",
         "--overwrite", "nvidia.com/gpu=present:NoSchedule"],
        ["kubectl", "--kubeconfig", k, "apply", "-f", str(d / "device-plugin.yaml")],
        ["kubectl", "--kubeconfig", k, "-n", "gpu-lab-system", "rollout", "status",
         "daemonset/gpu-lab-device-plugin-a100", "--timeout=180s"],
        ["kubectl", "--kubeconfig", k, "wait", "nodes", "-l", "gpulab.dev/pool=a100",
         "--for=jsonpath={.status.allocatable.nvidia\\.com/mig-3g\\.20gb}=4", "--timeout=180s"],
    ]  # fmt: skip
    again = [list(s.argv) for s in plan.steps(create=False)]
    assert again == [list(s.argv) for s in plan.steps()][2:]  # no create, no CoreDNS scaling
    assert [list(s.argv) for s in cmd.down_steps("demo", d / "kubeconfig")] == [
        ["kind", "delete", "cluster", "--name", "demo", "--kubeconfig", k],
        ["docker", "network", "rm", "gpu-lab-kind-demo"],
    ]
    assert list(cmd.docker_info().argv) == ["docker", "info", "--format", "{{.ServerVersion}}"]
    assert list(cmd.image_inspect(image).argv) == [
        "docker", "image", "inspect", "--format", "{{.Id}}", image
    ]
    assert cmd.network("demo") == "gpu-lab-kind-demo"


def test_script_quotes_every_argv(plan):
    text = plan.script()
    assert text.startswith("#!/bin/sh\n")
    cmds = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "set "))]
    steps = [cmd.docker_info(), cmd.kind_version(), *plan.steps()]
    assert [shlex.split(ln) for ln in cmds] == [list(s.argv) for s in steps]


@pytest.mark.parametrize(
    ("resource", "field"),
    [("nvidia.com/gpu", "nvidia\\.com/gpu"),
     ("nvidia.com/mig-1g.10gb", "nvidia\\.com/mig-1g\\.10gb"),
     ("nvidia.com/gpu.shared", "nvidia\\.com/gpu\\.shared")],
)  # fmt: skip
def test_jsonpath_escapes_dots(resource, field):
    assert cmd.jsonpath_field(resource) == field


# =========================================================================== runner


IMAGE_ID = "sha256:" + "0" * 64


class FakeShell:
    """``subprocess.run`` and ``shutil.which`` stand-ins: tools present (in /usr/bin) unless
    removed, images built, answers per argv prefix. ``calls`` holds each argv as written in
    its Step (the runner runs the tool ``which`` found: ``argv0`` holds those), ``kwargs``
    the keyword arguments of each call."""

    def __init__(self, missing=(), answers=None):
        self.missing = set(missing)
        self.answers = dict(answers or {})
        self.calls: list[list[str]] = []
        self.argv0: list[str] = []
        self.kwargs: list[dict] = []

    def which(self, tool):
        return None if tool in self.missing else f"/usr/bin/{tool}"

    def run(self, argv, **kw):
        argv = list(argv)
        self.argv0.append(argv[0])
        argv[0] = argv[0].removeprefix("/usr/bin/")
        self.calls.append(argv)
        self.kwargs.append(kw)
        for prefix, answer in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix:
                if isinstance(answer, BaseException):
                    raise answer
                rc, out, err = answer
                return subprocess.CompletedProcess(argv, rc, out, err)
        if argv[:2] == ["kind", "version"]:
            return subprocess.CompletedProcess(argv, 0, "kind v0.33.0 go1.25.1 linux/amd64\n", "")
        if argv[:2] == ["docker", "info"]:
            return subprocess.CompletedProcess(argv, 0, "29.1.0\n", "")
        if argv[:3] == ["docker", "image", "inspect"]:
            return subprocess.CompletedProcess(argv, 0, IMAGE_ID + "\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def runner(self, **kw):
        return cmd.Runner(progress=None, run=self.run, which=self.which, **kw)


NO_DAEMON = (
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
    "Is the docker daemon running?"
)


def test_runner_runs_the_tool_it_found_with_the_clusters_network(tmp_path):
    sh = FakeShell()
    runner = sh.runner(env={"KIND_EXPERIMENTAL_DOCKER_NETWORK": "gpu-lab-kind-x"})
    runner.run(cmd.kind_get_clusters())
    assert sh.calls == [["kind", "get", "clusters"]]
    assert sh.argv0 == ["/usr/bin/kind"]  # the path `which` gave
    (kw,) = sh.kwargs
    assert kw["env"] == {**os.environ, "KIND_EXPERIMENTAL_DOCKER_NETWORK": "gpu-lab-kind-x"}
    assert kw["stdin"] == subprocess.DEVNULL and kw["capture_output"] is True
    plain = FakeShell()
    plain.runner().run(cmd.kind_get_clusters())
    assert "env" not in plain.kwargs[0]  # no extra environment: the caller's, untouched
    lab = KindCluster("x", root=tmp_path)
    assert lab.runner(None).env == {"KIND_EXPERIMENTAL_DOCKER_NETWORK": "gpu-lab-kind-x"}


def test_runner_finds_tools_gpu_lab_kind_build_left_in_the_cache(tmp_path, monkeypatch):
    """Not on PATH: the real ``which`` falls back on the cache of ``gpu-lab kind build``;
    a test's own ``which`` never does."""
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    real = cmd.Runner(progress=None)
    assert real.resolve("kind") is None
    with pytest.raises(KindError, match=r"^kind not found on PATH"):
        real.require("kind")
    kind = tmp_path / "cache" / "bin" / f"kind-{kc.KIND_RELEASE}" / "kind"
    kind.parent.mkdir(parents=True)
    kind.write_text("#!/bin/sh\n")
    kind.chmod(0o755)
    kubectl = cpbuild.output_dirs()["kubectl"] / "kubectl"
    kubectl.parent.mkdir(parents=True)
    kubectl.write_text("#!/bin/sh\n")
    kubectl.chmod(0o755)
    assert real.resolve("kind") == str(kind) == real.require("kind")
    assert real.resolve("kubectl") == str(kubectl)
    assert real.resolve("docker") is None  # not something gpu-lab builds
    assert FakeShell(missing={"kind"}).runner().resolve("kind") is None


def test_missing_docker_cli_is_named():
    with pytest.raises(KindError) as err:
        FakeShell(missing={"docker"}).runner().preflight()
    assert str(err.value).startswith("docker not found on PATH: ")
    assert "\n" not in str(err.value)


def test_no_docker_engine_is_one_clear_line():
    sh = FakeShell(answers={("docker", "info"): (1, "\n", NO_DAEMON + "\n")})
    with pytest.raises(KindError) as err:
        sh.runner().preflight()
    msg = str(err.value)
    assert msg.startswith(f"no Docker engine: {NO_DAEMON}")
    assert "\n" not in msg
    assert sh.calls == [["docker", "info", "--format", "{{.ServerVersion}}"]]


def test_docker_engine_that_hangs():
    sh = FakeShell(answers={("docker", "info"): subprocess.TimeoutExpired("docker", 30)})
    with pytest.raises(KindError, match=r"^no Docker engine: `docker info` did not answer in 30 s"):
        sh.runner().preflight()


def test_missing_kind_and_kubectl_are_named():
    with pytest.raises(KindError, match=r"^kind not found on PATH: install kind v0\.33\.0"):
        FakeShell(missing={"kind"}).runner().preflight()
    with pytest.raises(KindError, match=r"^kubectl not found on PATH"):
        FakeShell(missing={"kubectl"}).runner().preflight()
    FakeShell(missing={"kubectl"}).runner().preflight(("docker", "kind"))  # down needs no kubectl


def test_old_kind_is_refused():
    sh = FakeShell(answers={("kind", "version"): (0, "kind v0.29.0 go1.24.2 linux/amd64\n", "")})
    with pytest.raises(KindError, match=r"^kind v0\.29\.0 is too old: .* kind v0\.33\.0 or newer on PATH"):
        sh.runner().preflight()
    assert cmd.parse_kind_version("kind v0.34.0-alpha+abc go1.25 linux/arm64") == (0, 34, 0)


def test_failed_step_is_one_line_with_the_log(tmp_path):
    sh = FakeShell(answers={("kind", "create"): (1, "", "Creating cluster...\nERROR: failed to "
                                                "create cluster: node(s) already exist\n")})
    log = tmp_path / "up.log"
    step = cmd.kind_create("x", tmp_path / "c.yaml", tmp_path / "k")
    with pytest.raises(KindError) as err:
        sh.runner(log=log).run(step)
    assert str(err.value) == (
        "`kind create cluster ...` failed (exit 1): ERROR: failed to create cluster: "
        f"node(s) already exist (full output: {log})"
    )
    assert "Creating cluster..." in log.read_text() and step.shell() in log.read_text()


def test_this_machine_preflight_passes_or_fails_clearly():
    """The real runner on this machine: where no Docker engine answers it stops at the first
    missing piece with one line; where one answers, the Docker check passes and the rest
    passes or names the missing tool in one line."""
    docker = shutil.which("docker")
    engine = docker is not None and subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=60,
        stdin=subprocess.DEVNULL).returncode == 0
    runner = cmd.Runner(progress=None)
    if not engine:
        with pytest.raises(KindError) as err:
            runner.preflight()
        msg = str(err.value)
        assert "\n" not in msg
        assert msg.startswith("no Docker engine: " if docker else "docker not found on PATH")
        return
    runner.preflight(("docker",))
    try:
        runner.preflight()
    except KindError as err:
        msg = str(err)
        assert "\n" not in msg
        assert re.match(r"^(kind not found on PATH|kind v\S+ is too old|kubectl not found on PATH)",
                        msg), msg


# =========================================================================== KindCluster


def test_up_runs_preflight_then_every_step_and_writes_the_lab(tmp_path, scenario):
    sh = FakeShell()
    lab = KindCluster(NAME, root=tmp_path, repo=REPO, runner=sh.runner())
    plan = lab.up(scenario, progress=None)
    assert sh.calls[:5] == [
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        ["kind", "version"],
        ["docker", "image", "inspect", "--format", "{{.Id}}", kc.NODE_IMAGE],
        ["docker", "image", "inspect", "--format", "{{.Id}}", mf.IMAGE],
        ["kind", "get", "clusters"],
    ]
    assert sh.calls[5:] == [list(s.argv) for s in plan.steps()]
    assert not [c for c in sh.calls if c[:2] in (["kind", "delete"], ["docker", "build"])]
    d = tmp_path / "kind" / NAME
    assert yaml.safe_load((d / "kind-config.yaml").read_text()) == plan.config
    assert list(yaml.safe_load_all((d / "device-plugin.yaml").read_text())) == plan.manifests
    assert (d / "up.sh").read_text() == plan.script()
    assert lab.kubeconfig() == d / "kubeconfig"


def test_up_reuses_a_cluster_with_the_same_nodes_and_refuses_an_older_config(tmp_path, scenario):
    first = FakeShell()
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=first.runner()).up(scenario, progress=None)
    again = FakeShell(answers={("kind", "get", "clusters"): (0, f"other\n{NAME}\n", "")})
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=again.runner()).up(scenario, progress=None)
    assert not [c for c in again.calls if c[:2] == ["kind", "create"]]
    assert [c for c in again.calls if c[:2] == ["kind", "load"]]
    older = yaml.safe_load((tmp_path / "kind" / NAME / "kind-config.yaml").read_text())
    older["kubeadmConfigPatches"] = older["kubeadmConfigPatches"][:1]  # before the score log
    (tmp_path / "kind" / NAME / "kind-config.yaml").write_text(kc.dump(older))
    with pytest.raises(KindError, match="was made with an older gpu-lab's kind config: run `gpu-lab down"):
        KindCluster(NAME, root=tmp_path, repo=REPO, runner=again.runner()).up(scenario, progress=None)
    stranger = FakeShell(answers={("kind", "get", "clusters"): (0, "kind\n", "")})
    with pytest.raises(KindError, match="exists but gpu-lab did not make it"):
        KindCluster("kind", root=tmp_path, repo=REPO, runner=stranger.runner()).up(
            scenario, progress=None
        )


RESHAPED = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: t4}
spec:
  count: 1
  gpu: {model: T4, count: 4}
  labels: {team: infer}
  taints: [{key: spot, value: "true", effect: NoSchedule}]
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {count: 1, cpu: "16", memory: 64Gi}
"""


def _joins(calls) -> list[tuple[str, str]]:
    """(container, node name) of each `kubeadm join` a reshape ran."""
    out = []
    for c in calls:
        if c[:2] == ["docker", "exec"] and "kubeadm join" in c[-1]:
            out.append((c[2], re.search(r"s/\^  name: \.\*/  name: ([^/]+)/", c[-1])[1]))
    return out


def test_up_reshapes_a_running_cluster_to_another_scenarios_nodes(tmp_path, scenario):
    first = FakeShell()
    made = KindCluster(NAME, root=tmp_path, repo=REPO, runner=first.runner()).up(scenario, progress=None)
    config = (tmp_path / "kind" / NAME / "kind-config.yaml").read_text()
    running = {("kind", "get", "clusters"): (0, f"{NAME}\n", "")}
    again = FakeShell(answers=running)
    said: list[str] = []
    lab = KindCluster(NAME, root=tmp_path, repo=REPO, runner=again.runner())
    plan = lab.up(RESHAPED, progress=said.append)
    assert "exists: reshaping it for this scenario (2 of its 7 workers join as its nodes; " in said[0]
    assert not [c for c in again.calls if c[:2] in (["kind", "create"], ["kind", "delete"])]
    # t4-0 stays on the worker that played it; cpu-0 too; the config is the one it was made with
    assert plan.containers() == {"t4-0": made.containers()["t4-0"], "cpu-0": made.containers()["cpu-0"]}
    assert (tmp_path / "kind" / NAME / "kind-config.yaml").read_text() == config
    control_plane = f"{NAME}-control-plane"
    assert lab.containers_of_nodes() == {control_plane: control_plane, **plan.containers()}
    calls = again.calls[again.calls.index(["kind", "get", "clusters"]) + 1:]
    k = str(tmp_path / "kind" / NAME / "kubeconfig")
    assert calls[0][:6] == ["kubectl", "--kubeconfig", k, "-n", mf.NAMESPACE, "delete"]
    resets = [c[2] for c in calls if c[-3:] == ["kubeadm", "reset", "--force"]]
    assert resets == list(made.containers().values())  # every worker
    assert ["kubectl", "--kubeconfig", k, "delete", "nodes", *made.containers(), "--ignore-not-found"] in calls
    assert len([c for c in calls if "--field-selector" in c and "--force" in c]) == 7
    assert _joins(calls) == [(plan.containers()["t4-0"], "t4-0"), (plan.containers()["cpu-0"], "cpu-0")]
    t4 = next(w for w in plan.workers if w.node == "t4-0")
    join = next(c[-1] for c in calls if "kubeadm join" in c[-1] and "t4-0" in c[-1])
    assert "team=infer" in ",".join(f"{key}={v}" for key, v in t4.kind_labels.items())
    assert ("/^  - name: node-labels$/{n;s#^    value: .*#    value: "
            + ",".join(f"{key}={v}" for key, v in t4.kind_labels.items()) + "#}") in join
    wait = calls.index(["kubectl", "--kubeconfig", k, "wait", "--for=create", "node/t4-0", "node/cpu-0",
                        "--timeout=180s"])
    assert calls[wait + 1:] == [list(s.argv) for s in cmd.up_steps(
        NAME, image=mf.IMAGE, config=plan.paths["config"], manifests=plan.paths["manifests"],
        kubeconfig=plan.paths["kubeconfig"], patches=plan.patches, resources=plan.resources,
        create=False)]
    assert ["kubectl", "--kubeconfig", k, "taint", "nodes", "-l", "gpulab.dev/node=t4-0", "--overwrite",
            "spot=true:NoSchedule"] in calls
    # the same scenario again is plain reuse: nothing resets
    same = FakeShell(answers=running)
    said.clear()
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=same.runner()).up(RESHAPED, progress=said.append)
    assert said[0] == f"kind cluster {NAME!r} exists: reusing it"
    assert not [c for c in same.calls if "kubeadm" in " ".join(c)]
    # other names fit too: they take free workers; back to the first scenario, all seven join
    other = FakeShell(answers=running)
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=other.runner()).up(
        "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: x}\n"
        "spec: {count: 3, gpu: {model: L4, count: 1}}\n", progress=None)
    assert [n for _, n in _joins(other.calls)] == ["x-0", "x-1", "x-2"]
    assert ["kubectl", "--kubeconfig", k, "delete", "nodes", "t4-0", "cpu-0", "--ignore-not-found"] in other.calls
    back = FakeShell(answers=running)
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=back.runner()).up(scenario, progress=None)
    assert sorted(_joins(back.calls)) == sorted((c, n) for n, c in made.containers().items())


def test_a_scenario_with_more_nodes_than_workers_is_refused(tmp_path):
    two = "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: x}\nspec: {count: 2, cpu: '4', memory: 8Gi}\n"
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=FakeShell().runner()).up(two, progress=None)
    running = FakeShell(answers={("kind", "get", "clusters"): (0, f"{NAME}\n", "")})
    with pytest.raises(KindError, match=rf"^the kind cluster '{NAME}' has 2 workers and this scenario 3 "
                       r"nodes \(kind cannot add workers to a cluster\): run `gpu-lab down --backend kind"):
        KindCluster(NAME, root=tmp_path, repo=REPO, runner=running.runner()).up(
            two.replace("count: 2", "count: 3"), progress=None)


def test_a_reshape_that_fails_is_done_again_by_the_next_up(tmp_path, scenario):
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=FakeShell().runner()).up(scenario, progress=None)
    running = {("kind", "get", "clusters"): (0, f"{NAME}\n", "")}
    failing = FakeShell(answers={**running, ("kubectl", "--kubeconfig"): (1, "", "error: timed out\n")})
    with pytest.raises(KindError, match="timed out"):
        KindCluster(NAME, root=tmp_path, repo=REPO, runner=failing.runner()).up(RESHAPED, progress=None)
    assert not [c for c in failing.calls if c[:2] in (["kind", "create"], ["kind", "delete"])]
    again = FakeShell(answers=running)
    KindCluster(NAME, root=tmp_path, repo=REPO, runner=again.runner()).up(RESHAPED, progress=None)
    assert [n for _, n in _joins(again.calls)] == ["t4-0", "cpu-0"]


def test_up_stops_before_writing_anything_without_docker(tmp_path, scenario):
    sh = FakeShell(answers={("docker", "info"): (1, "", NO_DAEMON)})
    lab = KindCluster(NAME, root=tmp_path, repo=REPO, runner=sh.runner())
    with pytest.raises(KindError, match="^no Docker engine: "):
        lab.up(scenario, progress=None)
    assert not (tmp_path / "kind").exists()


def _no_image(image):
    return (("docker", "image", "inspect", "--format", "{{.Id}}", image),
            (1, "[]\n", f"Error response from daemon: No such image: {image}\n"))


def test_up_stops_with_one_line_before_writing_anything_when_an_image_is_not_built(
        tmp_path, scenario):
    sh = FakeShell(answers=dict([_no_image(mf.IMAGE)]))
    lab = KindCluster(NAME, root=tmp_path, repo=REPO, runner=sh.runner())
    with pytest.raises(KindError) as err:
        lab.up(scenario, progress=None)
    assert str(err.value) == (
        f"image {mf.IMAGE} not built yet: run `gpu-lab kind build` "
        "(about 2 minutes once the control plane is built)"
    )
    assert not (tmp_path / "kind").exists()
    assert sh.calls[-1][:3] == ["docker", "image", "inspect"]  # nothing after the check
    both = FakeShell(answers=dict([_no_image(mf.IMAGE), _no_image(kc.NODE_IMAGE)]))
    with pytest.raises(KindError, match=(
            rf"^image {re.escape(kc.NODE_IMAGE)}, {re.escape(mf.IMAGE)} not built yet: "
            r"run `gpu-lab kind build`")):
        KindCluster(NAME, root=tmp_path, runner=both.runner()).up(scenario, progress=None)
    assert not (tmp_path / "kind").exists()
    assert not [c for c in both.calls if c[0] == "kind" and c[1] != "version"]


def test_up_without_gpus_needs_only_the_node_image(tmp_path):
    sh = FakeShell(answers=dict([_no_image(mf.IMAGE)]))
    KindCluster("cpu", root=tmp_path, runner=sh.runner()).up(
        "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: c}\n"
        "spec: {count: 1, cpu: '4', memory: 8Gi}\n", progress=None)
    inspected = [c[-1] for c in sh.calls if c[:3] == ["docker", "image", "inspect"]]
    assert inspected == [kc.NODE_IMAGE]
    assert ["kind", "create"] in [c[:2] for c in sh.calls]


def _cleanup(name, root):
    k = str(root / "kind" / name / "kubeconfig")
    return [["kind", "delete", "cluster", "--name", name, "--kubeconfig", k],
            ["docker", "network", "rm", f"gpu-lab-kind-{name}"]]


def test_failed_creation_deletes_the_half_made_cluster(tmp_path, scenario):
    sh = FakeShell(answers={("kind", "create"): (1, "", "ERROR: failed to create cluster: "
                                                "failed to join node with kubeadm\n")})
    lab = KindCluster(NAME, root=tmp_path, repo=REPO, runner=sh.runner())
    with pytest.raises(KindError, match=r"^`kind create cluster \.\.\.` failed \(exit 1\): "
                                        "ERROR: failed to create cluster: failed to join"):
        lab.up(scenario, progress=None)
    create = next(i for i, c in enumerate(sh.calls) if c[:2] == ["kind", "create"])
    assert sh.calls[create + 1:] == _cleanup(NAME, tmp_path)
    # a later step failing after a creation: the same clean-up
    late = FakeShell(answers={("kubectl", "--kubeconfig"): (1, "", "error: timed out\n")})
    with pytest.raises(KindError, match="timed out"):
        KindCluster(NAME, root=tmp_path, repo=REPO, runner=late.runner()).up(scenario,
                                                                              progress=None)
    assert late.calls[-2:] == _cleanup(NAME, tmp_path)
    # a reused cluster is never deleted by a failing step: it was there before
    (tmp_path / "kind" / NAME / "kind-config.yaml").write_text(lab.plan(scenario).config_text)
    reused = FakeShell(answers={("kind", "get", "clusters"): (0, f"{NAME}\n", ""),
                                ("kind", "load"): (1, "", "ERROR: image not present locally\n")})
    with pytest.raises(KindError, match="image not present locally"):
        KindCluster(NAME, root=tmp_path, repo=REPO, runner=reused.runner()).up(scenario,
                                                                                progress=None)
    assert not [c for c in reused.calls if c[:2] in (["kind", "create"], ["kind", "delete"])]


def test_down_deletes_only_an_existing_cluster(tmp_path):
    present = FakeShell(answers={("kind", "get", "clusters"): (0, f"{NAME}\n", "")})
    lab = KindCluster(NAME, root=tmp_path, runner=present.runner())
    (tmp_path / "kind" / NAME).mkdir(parents=True)
    assert lab.down(progress=None, purge=True) is True
    assert present.calls[-2:] == _cleanup(NAME, tmp_path)
    assert not (tmp_path / "kind" / NAME).exists()
    absent = FakeShell()
    assert KindCluster(NAME, root=tmp_path, runner=absent.runner()).down(progress=None) is False
    assert not [c for c in absent.calls if c[:2] in (["kind", "delete"], ["docker", "network"])]


def test_down_tolerates_a_network_kind_did_not_make(tmp_path):
    """kind uses an existing network as it is; ``docker network rm`` failing is no error."""
    sh = FakeShell(answers={("kind", "get", "clusters"): (0, f"{NAME}\n", ""),
                            ("docker", "network", "rm"): (1, "", "Error: network in use\n")})
    assert KindCluster(NAME, root=tmp_path, runner=sh.runner()).down(progress=None) is True
    assert sh.calls[-2:] == _cleanup(NAME, tmp_path)
    failing = FakeShell(answers={("kind", "get", "clusters"): (0, f"{NAME}\n", ""),
                                 ("kind", "delete"): (1, "", "ERROR: failed to delete\n")})
    with pytest.raises(KindError, match="failed to delete"):
        KindCluster(NAME, root=tmp_path, runner=failing.runner()).down(progress=None)


# =========================================================================== plugin image


def test_plugin_image_runs_the_device_plugin_on_the_node_rootfs():
    text = kb.PLUGIN_DOCKERFILE
    assert text.splitlines()[0] == f"FROM {kb.ROOTFS_IMAGE}"
    assert re.findall(r"^ENTRYPOINT .*$", text, re.M) == ['ENTRYPOINT ["gpu-lab", "device-plugin"]']
    assert "COPY gpu-lab /usr/local/bin/gpu-lab" in text  # the launcher is on the image's PATH


def test_plugin_launcher_runs_the_entrypoint(tmp_path):
    """The launcher the image installs as ``gpu-lab``, run with the entrypoint's arguments."""
    launcher = tmp_path / "gpu-lab"
    launcher.write_text(kb.LAUNCHER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, str(launcher), "device-plugin", "--help"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "--plugin-dir" in res.stdout and "--mig-config" in res.stdout


def test_plugin_requirements_drop_exactly_numpy_and_pandas(tmp_path):
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    got = kb.plugin_requirements(REPO / "pyproject.toml")
    assert got == [d for d in deps if not d.startswith(("numpy", "pandas"))]
    assert len(deps) - len(got) == 2  # pyproject has both
    assert any(d.startswith("grpcio") for d in got)
    sample = tmp_path / "pyproject.toml"
    sample.write_text('[project]\nname = "x"\ndependencies = ["numpy>=1.24", "pandas[perf]>=2", '
                      '"numpy ; python_version < \'3.13\'", "numpydoc>=1", "pandas-stubs", '
                      '"pyyaml>=6", "grpcio~=1.85"]\n')
    assert kb.plugin_requirements(sample) == ["numpydoc>=1", "pandas-stubs", "pyyaml>=6",
                                              "grpcio~=1.85"]


def test_device_plugin_entrypoint_needs_neither_numpy_nor_pandas():
    code = (
        "import sys; from gpu_lab.cli import main; from gpu_lab.deviceplugin import plugin; "
        "plugin.FakeDevicePlugin('H100-80GB', 2, None, '/tmp', 'n'); "
        "bad = {'numpy', 'pandas'} & set(sys.modules); print(sorted(bad)); sys.exit(bool(bad))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


# =========================================================================== real API server


def _binaries_or_skip() -> None:
    require_controlplane("the local control plane tests")


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """A real local control plane for the module: (LocalCluster, KubeClient)."""
    _binaries_or_skip()
    from gpu_lab.backends.local.cluster import LocalCluster

    lab = LocalCluster(f"kind-{uuid.uuid4().hex[:8]}", root=tmp_path_factory.mktemp("cp"))
    try:
        lab.up(progress=None)
        with lab.client() as client:
            yield lab, client
    finally:
        lab.down(progress=None, purge=True)


@pytest.fixture(scope="module")
def registered(api, plan):
    """The kind workers as their kubelets register them: the scenario's node names (the
    JoinConfiguration's nodeRegistration.name, which kubeadm also gives the kubelet as
    ``--hostname-override``), the kind config's labels plus what the kubelet sets itself.
    Creating them for real also shows the API server takes every label the kind config
    gives."""
    _, client = api
    for w in plan.workers:
        labels = {**w.kind_labels, "kubernetes.io/hostname": w.node,
                  "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        client.create({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": w.node, "labels": labels}})
    return plan


@pytest.mark.controlplane
def test_every_manifest_passes_server_side_dry_run(api, plan):
    from gpu_lab.kube import AlreadyExists, NotFound

    _, client = api
    ns, *rest = plan.manifests
    assert ns["kind"] == "Namespace"
    with contextlib.suppress(AlreadyExists):  # another test made it first: valid then
        assert client.create(ns, dry_run=True)["metadata"]["name"] == mf.NAMESPACE
    _ensure_namespace(client)  # namespaced objects need it to exist, even in dry-run
    for obj in rest:
        out = client.create(obj, namespace=mf.NAMESPACE, dry_run=True)
        assert out["metadata"]["name"] == obj["metadata"]["name"]
    with pytest.raises(NotFound):
        client.get("DaemonSet", rest[-1]["metadata"]["name"], namespace=mf.NAMESPACE)


@pytest.mark.controlplane
def test_daemonset_pods_pass_admission_on_their_nodes(api, registered):
    """The pod each DaemonSet would make, bound to a node of its pool (priority class,
    hostPath, ConfigMap volumes, fieldRef env go through the API server's admission)."""
    _, client = api
    plan = registered
    for pool, ds in _daemonsets(plan).items():
        node = next(w.node for w in plan.workers if w.pool == pool)
        spec = dict(ds["spec"]["template"]["spec"], nodeName=node)
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{ds['metadata']['name']}-x", "namespace": mf.NAMESPACE,
                            "labels": ds["spec"]["template"]["metadata"]["labels"]},
               "spec": spec}
        _ensure_namespace(client, service_account=True)
        out = client.create(pod, namespace=mf.NAMESPACE, dry_run=True)
        assert out["spec"]["priority"] == 2000001000  # system-node-critical resolved


def _ensure_namespace(client, service_account: bool = False) -> None:
    """The namespace exists; with ``service_account``, also its ``default`` ServiceAccount
    (the controller-manager makes it a moment later; pods are refused until then)."""
    from gpu_lab.kube import AlreadyExists, NotFound

    with contextlib.suppress(AlreadyExists):
        client.create(mf.namespace())
    deadline = time.monotonic() + 30
    while service_account:
        try:
            client.get("ServiceAccount", "default", namespace=mf.NAMESPACE)
            return
        except NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.controlplane
def test_node_patches_pass_server_side_dry_run(api, registered):
    _, client = api
    plan = registered
    for p in plan.patches:
        live = client.get("Node", p.node)
        out = client.patch("Node", p.node, p.merge_patch(live), dry_run=True)
        assert {k: out["metadata"]["labels"][k] for k in p.labels} == p.labels
        got = {(t["key"], t.get("value", ""), t["effect"]) for t in out["spec"].get("taints", [])}
        assert {(t.key, t.value, t.effect) for t in p.taints} <= got
        assert "nvidia.com/gpu.product" not in client.get("Node", p.node)["metadata"].get(
            "labels", {})  # dry run: nothing stored


def _kubectl_or_skip() -> str:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl not on PATH")
    return kubectl


def _run_kubectl(argv, check=True):
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    if check:
        assert res.returncode == 0, f"{shlex.join(argv)}\n{res.stdout}{res.stderr}"
    return res


@pytest.mark.controlplane
def test_kubectl_steps_are_accepted_by_a_real_api_server(api, registered, tmp_path):
    """The label, taint and apply steps, exactly as planned but against the local API server
    and with ``--dry-run=server`` appended."""
    _kubectl_or_skip()
    lab, client = api
    _ensure_namespace(client)
    kind = KindCluster(NAME, root=tmp_path, repo=REPO)
    plan = kind.plan(SCENARIO)
    plan.paths = dict(plan.paths, kubeconfig=lab.kubeconfig())
    plan.write()
    steps = plan.steps(create=False)
    mutating = [s for s in steps if s.argv[3:4] in (("label",), ("taint",), ("apply",))]
    assert len(mutating) == 1 + sum(bool(p.labels) + bool(p.taints) for p in plan.patches)
    for s in mutating:
        res = _run_kubectl([*s.argv, "--dry-run=server"])
        assert res.stdout.strip()
    for w in plan.workers:  # a dry run: nothing stored
        live = client.get("Node", w.node)
        assert not any(k.startswith("nvidia.com/") for k in live["metadata"]["labels"])
        taints = live["spec"].get("taints", [])
        assert not [t for t in taints if not t["key"].startswith("node.kubernetes.io/")]


@pytest.mark.controlplane
def test_kubectl_wait_for_allocatable_matches_escaped_resource_names(api, registered):
    """Give the a100 node the allocatable its kubelet would report once the plugin
    registered; the planned ``kubectl wait`` then succeeds (and fails on a wrong count)."""
    _kubectl_or_skip()
    lab, client = api
    plan = registered
    node = next(w.node for w in plan.workers if w.pool == "a100")
    assert node == "a100-0"
    alloc = {r: str(n) for r, n in plan.resources["a100"].items()}
    status = {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110", **alloc},
              "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", **alloc}}
    client.patch("Node", node, {"status": status}, subresource="status")
    waits = [s for s in plan.steps(create=False)
             if s.argv[3] == "wait" and "gpulab.dev/pool=a100" in s.argv]
    assert len(waits) == len(alloc) >= 2  # mixed MIG: one resource per profile
    for s in waits:
        argv = list(s.argv)
        argv[argv.index("--kubeconfig") + 1] = str(lab.kubeconfig())
        argv[-1] = "--timeout=5s"
        _run_kubectl(argv)
    wrong = cmd.wait_allocatable(lab.kubeconfig(), "a100", next(iter(alloc)), 99)
    res = _run_kubectl([*wrong.argv[:-1], "--timeout=1s"], check=False)
    assert res.returncode != 0
