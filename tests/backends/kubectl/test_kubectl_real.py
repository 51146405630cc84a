"""``Session.kubectl`` on the real backends, without a cluster: which kubectl, which flags."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_lab
from gpu_lab.backends.base import CONTRACT
from gpu_lab.backends.kind.session import KindSession
from gpu_lab.backends.kubeconfig.session import KubeconfigSession
from gpu_lab.backends.kubectl import real
from gpu_lab.backends.kubectl.real import Target, argv_for

K = Path("/bin/kubectl")


def test_kubectl_is_in_the_contract():
    assert "kubectl" in CONTRACT


def test_the_lab_sets_kubeconfig_context_and_namespace():
    t = Target(Path("/lab/kubeconfig"), "ctx", "gpu-lab")
    assert argv_for("get pods -o wide", t, K) == [
        "/bin/kubectl", "--kubeconfig", "/lab/kubeconfig", "--context", "ctx", "--namespace", "gpu-lab",
        "get", "pods", "-o", "wide"]
    # a namespace the command names wins; the local lab's pods are in kubectl's default
    assert "gpu-lab" not in argv_for("get pods -A", t, K)
    assert "gpu-lab" not in argv_for("kubectl get events --namespace=other", t, K)
    assert argv_for("describe node h100-0", Target(Path("/k")), K) == [
        "/bin/kubectl", "--kubeconfig", "/k", "describe", "node", "h100-0"]


@pytest.mark.parametrize("command, match", [
    ("delete pod x", "^kubectl delete: gpu-lab runs read-only kubectl commands \\(get, describe"),
    ("apply -f x.yaml", "^kubectl apply: gpu-lab runs read-only"),
    ("get pods --context=prod", "^kubectl: --context is not taken here"),
    ("get pods -w", "^kubectl: -w is not taken here"),
])
def test_only_read_only_commands_run(command, match):
    with pytest.raises(gpu_lab.GpuLabError, match=match):
        argv_for(command, Target(Path("/k")), K)


def test_the_cached_kubectl_first_then_path_then_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(real.shutil, "which", lambda name: None)
    with pytest.raises(gpu_lab.GpuLabError) as err:
        real.find_kubectl()
    assert str(err.value).endswith("run `gpu-lab controlplane build --components kubectl`")
    assert "\n" not in str(err.value)
    monkeypatch.setattr(real.shutil, "which", lambda name: "/usr/bin/kubectl")
    assert real.find_kubectl() == Path("/usr/bin/kubectl")
    cached = tmp_path / "bin" / "k8s-v1.37.2" / "kubectl"
    cached.parent.mkdir(parents=True)
    cached.write_text("")
    assert real.find_kubectl() == cached


def test_a_kubeconfig_session_gives_kubectl_its_kubeconfig(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(real, "find_kubectl", lambda: K)
    monkeypatch.setattr(real.subprocess, "run", lambda argv, **kw: calls.append(argv) or
                        type("R", (), {"stdout": "NAME\n", "stderr": "", "returncode": 0})())
    session = KubeconfigSession.__new__(KubeconfigSession)  # no cluster: only what kubectl reads
    session._kubeconfig_path, session._context, session.namespace = tmp_path / "kc", None, "gpu-lab"
    out = session.kubectl("get pods")
    assert (out.text, out.returncode) == ("NAME", 0)
    assert calls == [[str(K), "--kubeconfig", str(tmp_path / "kc"), "--namespace", "gpu-lab", "get", "pods"]]
    session._kubeconfig_path = None
    with pytest.raises(gpu_lab.NotSupported, match='^kubectl: not on the "kubeconfig" backend: '):
        session.kubectl("get pods")


def test_a_kind_session_gives_kubectl_its_clusters_kubeconfig(monkeypatch, tmp_path):
    session = KindSession(name="kx", root=tmp_path)
    with pytest.raises(gpu_lab.GpuLabError, match="^no kind cluster 'kx' yet"):
        session.kubectl("get pods")  # before the first apply with nodes made one
    session._connected = True
    target = session._kubectl_target()
    assert (target.kubeconfig, target.context, target.namespace) == (session.cluster.kubeconfig(), None,
                                                                      "gpu-lab")
