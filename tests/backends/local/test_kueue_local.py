"""Real Kueue (sigs.k8s.io/kueue v0.17.0) on the local backend: `gpu-lab up --with kueue`
installs its CRDs and webhooks and runs its manager; quota per GPU flavor admits one
8-GPU Job and holds the next with Kueue's own message; its webhooks suspend queued Jobs
and refuse bad ClusterQueues. In CI (CI=true) these fail when Kueue or the control plane
is not built; elsewhere they skip with the command that builds them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from realcluster import require_kueue

from gpu_lab import processes as procs
from gpu_lab.backends.local import kueue, kueuebuild
from gpu_lab.backends.local.cluster import LocalCluster
from gpu_lab.backends.local.kueuescenario import KueueRun, read_outcomes
from gpu_lab.errors import GpuLabError
from gpu_lab.kube import ApiError

REPO = Path(__file__).parents[3]
AV = kueue.API_VERSION
LAB = "kq"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
#: Kueue's words (pkg/scheduler/flavorassigner, pkg/controller/core, pkg/cache/queue)
PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for "
           "nvidia.com/gpu in flavor h100, 8 more needed")
CQ_MISSING_LQ = "Can't submit new workloads to clusterQueue"
CQ_MISSING_WL = "ClusterQueue no-such-cq doesn't exist"

controlplane = pytest.mark.controlplane


def _gpu_lab(env, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "gpu_lab.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def _job(name: str, queue: str | None, *, pods: int = 8, suspend: bool | None = None,
         submit_at: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    if submit_at:
        meta["annotations"] = {"gpulab.dev/submit-at": submit_at}
    spec: dict = {
        "parallelism": pods,
        "completions": pods,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "trainer", "image": "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"},
                          "limits": {"nvidia.com/gpu": 1}}}]}},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _pool(name: str, model: str) -> dict:
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"count": 1, "gpu": {"model": model, "count": 8}, "cpu": "96",
                     "memory": "1024Gi"}}


def _flavor(name: str, product: str) -> dict:
    return {"apiVersion": AV, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}}


def _cluster_queue(name: str, gpus: int = 8) -> dict:
    return {"apiVersion": AV, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [
                    {"name": "cpu", "nominalQuota": "64"},
                    {"name": "memory", "nominalQuota": "512Gi"},
                    {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}}


def _local_queue(name: str, cluster_queue: str) -> dict:
    return {"apiVersion": AV, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterQueue": cluster_queue}}


def _condition(obj: dict, type_: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == type_), {})


def _until(fn, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got is not None and got is not False:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# =========================================================================== no cluster


def test_settings_refuse_a_bad_pods_ready_timeout_in_one_line():
    with pytest.raises(GpuLabError, match=r'^waitForPodsReady.timeout: invalid duration "soon"'):
        kueue.KueueSettings(pods_ready_timeout="soon")
    with pytest.raises(GpuLabError, match="must be greater than 0"):
        kueue.KueueSettings(pods_ready_timeout="0s")


def test_up_refuses_a_bad_timeout_before_starting_anything(tmp_path):
    env = {**os.environ, "GPU_LAB_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    res = _gpu_lab(env, "up", "--name", "never", "--with", "kueue",
                   "--kueue-pods-ready-timeout=-5m", timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == ('error: waitForPodsReady.timeout: invalid duration "-5m" '
                                  "(use e.g. 90s, 5m, 1h30m)")
    assert not (tmp_path / "clusters" / "never").exists()


@pytest.mark.controlplane  # reads the Kueue build
def test_the_manifests_point_every_webhook_at_the_lab_port():
    kb = require_kueue()
    m = kueue.render(kb.manifests, 23456)
    assert (m.namespace, m.prefix) == ("kueue-system", "kueue-")
    assert {c["metadata"]["name"] for c in m.crds} >= {
        "resourceflavors.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io"}
    # the conversion webhooks config/components/crd's kustomization enables
    converted = {c["metadata"]["name"] for c in m.crds if c["spec"].get("conversion")}
    assert converted == {"localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
                         "cohorts.kueue.x-k8s.io", "workloads.kueue.x-k8s.io",
                         "multikueueclusters.kueue.x-k8s.io"}
    names = [w["metadata"]["name"] for w in m.webhooks]
    assert sorted(names) == ["kueue-mutating-webhook-configuration",
                             "kueue-validating-webhook-configuration"]
    refs = [w["clientConfig"]["service"] for cfg in m.webhooks for w in cfg["webhooks"]]
    refs += [c["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
             for c in m.crds if c["spec"].get("conversion")]
    assert {(r["namespace"], r["name"], r["port"]) for r in refs} == {
        ("kueue-system", "kueue-webhook-service", 23456)}
    assert m.service["spec"] == {"type": "ExternalName", "externalName": "127.0.0.1",
                                 "ports": [{"name": "https", "port": 23456, "protocol": "TCP"}]}
    # the kustomization's namespaceSelector patches: Kueue's pod webhook skips its own namespace
    mutating = next(w for w in m.webhooks if w["kind"] == "MutatingWebhookConfiguration")
    mpod = next(w for w in mutating["webhooks"] if w["name"] == "mpod.kb.io")
    assert mpod["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system", "kueue-system"]
    assert kueuebuild.module_version(kb.binary) == "v0.17.0"


@pytest.mark.controlplane  # reads the Kueue build
def test_controlplane_build_with_kueue_keeps_an_up_to_date_build(tmp_path):
    kb = require_kueue()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = _gpu_lab(env, "controlplane", "build", "--with", "kueue", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"kueue v0.17.0: up to date ({kb.binary})" in res.stdout
    assert f"kueue\t{kb.binary}" in res.stdout.splitlines()
    bad = _gpu_lab(env, "controlplane", "build", "--with", "volcano", timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'volcano'" in bad.stderr


# =========================================================================== a real lab


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    require_kueue()
    return tmp_path_factory.mktemp("gpu-lab-kueue")


@pytest.fixture(scope="module")
def env(home):
    return {**os.environ, "GPU_LAB_HOME": str(home), "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def started(home, env):
    """One lab with Kueue for the module, started by `gpu-lab up --with kueue`."""
    lab = LocalCluster(LAB, root=home)
    try:
        res = _gpu_lab(env, "up", "--name", LAB, "--with", "kueue",
                       "--kueue-pods-ready-timeout", "2m")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "control plane ready in" in res.stdout
        assert ("kueue: the API server reaches its webhooks "
                "(https://kueue-webhook-service.kueue-system.svc:") in res.stdout
        yield lab
    finally:
        down = _gpu_lab(env, "down", "--name", LAB)
    assert down.returncode == 0, down.stderr
    assert "kueue: terminated" in down.stdout
    assert procs.find("kueue", str(lab.dir) + os.sep) == []


@pytest.fixture
def lab(started):
    return started.up(progress=None)


@pytest.fixture
def client(lab):
    c = lab.client()
    yield c
    c.close()


@controlplane
def test_status_shows_the_kueue_process_and_its_configuration(lab, env):
    res = _gpu_lab(env, "status", "--name", LAB)
    assert res.returncode == 0, res.stdout + res.stderr
    row = next(ln.split() for ln in res.stdout.splitlines() if ln.startswith("kueue "))
    assert row[1] == "healthy" and int(row[2]) > 0
    doc = json.loads(_gpu_lab(env, "status", "--name", LAB, "--json").stdout)
    assert doc["components"]["kueue"]["state"] == "healthy"
    cfg = yaml.safe_load((lab.dir / "kueue" / "config.yaml").read_text())
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert cfg["waitForPodsReady"] == {"timeout": "2m", "blockAdmission": False}
    assert cfg["integrations"] == {"frameworks": ["batch/job"]}
    assert cfg["internalCertManagement"]["enable"] is True
    logs = _gpu_lab(env, "logs", "kueue", "--name", LAB, "--tail", "-1").stdout
    assert '"msg":"Initializing","gitVersion":"v0.17.0"' in logs
    assert "CA certs are injected to webhooks" in logs


@controlplane
def test_quota_admits_the_first_8_gpu_job_and_holds_the_second(lab, client):
    scenario = [
        _pool("h100", "H100-80GB"), _pool("a100", "A100-80GB"),
        _flavor("h100", H100), _flavor("a100", A100),  # a ResourceFlavor per GPU model
        _cluster_queue("training", gpus=8), _local_queue("team-a", "training"),
        _job("train-1", "team-a"), _job("train-2", "team-a", submit_at="1s"),
    ]
    with KueueRun(lab, scenario, timeout=90) as run:
        table = run.wait(pods_ready=True).set_index("name")
        first, second = table.loc["train-1"], table.loc["train-2"]
        assert first["admitted"] and first["order"] == 1 and first["pods_ready"]
        assert first["cluster_queue"] == "training"
        assert first["flavors"] == {"cpu": "h100", "memory": "h100", "nvidia.com/gpu": "h100"}
        assert not first["suspended"] and first["pending_message"] is None
        assert not second["admitted"] and second["suspended"]
        assert second["pending_message"] == PENDING
        # the Workload's own conditions, as `kubectl describe workload` shows them
        wl = client.get("Workload", first["workload"], namespace="default", api_version=AV)
        assert _condition(wl, "Admitted")["message"] == "The workload is admitted"
        assert _condition(wl, "PodsReady")["message"] == (
            "All pods reached readiness and the workload is running")
        held = client.get("Workload", second["workload"], namespace="default", api_version=AV)
        assert _condition(held, "QuotaReserved")["reason"] == "Pending"
        # Kueue injected the flavor's node labels: all 8 pods run on the H100 node
        pods = [p for p in client.list("Pod", namespace="default")["items"]
                if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == "train-1"]
        assert len(pods) == 8
        assert {p["spec"]["nodeSelector"]["nvidia.com/gpu.product"] for p in pods} == {H100}
        assert {(p["spec"]["nodeName"], p["status"]["phase"]) for p in pods} == {
            ("h100-0", "Running")}
        assert not [p for p in client.list("Pod", namespace="default")["items"]
                    if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == "train-2"]


@controlplane
def test_the_webhook_suspends_a_queued_job_created_unsuspended(lab, client):
    client.create(_local_queue("webhook-q", "webhook-cq"))
    try:
        # the create response is the object as admission left it: Kueue's mutating webhook
        # (mjob.kb.io) set suspend before the Job controller could create a pod
        made = client.create(_job("queued", "webhook-q", pods=1, suspend=False))
        assert made["spec"]["suspend"] is True
        # a Job without the queue-name label is not Kueue's (manageJobsWithoutQueueName: false)
        free = client.create(_job("free", None, pods=1, suspend=False), dry_run=True)
        assert free["spec"]["suspend"] is False
    finally:
        client.delete("Job", "queued", namespace="default", propagation_policy="Background",
                      missing_ok=True)
        client.delete("LocalQueue", "webhook-q", namespace="default", api_version=AV,
                      missing_ok=True)


@controlplane
def test_a_localqueue_naming_a_missing_clusterqueue_is_inactive(lab, client):
    client.create(_local_queue("orphan", "no-such-cq"))
    try:
        lq = _until(lambda: _condition(client.get("LocalQueue", "orphan", namespace="default",
                                                  api_version=AV), "Active") or None,
                    what="the LocalQueue's Active condition")
        assert (lq["status"], lq["reason"], lq["message"]) == (
            "False", "ClusterQueueDoesNotExist", CQ_MISSING_LQ)
        client.create(_job("orphan-job", "orphan", pods=1))

        def held():
            t = read_outcomes(client, [("default", "orphan-job")])
            return t if t.loc[0, "pending_message"] else None

        table = _until(held, what="Kueue's verdict on orphan-job")
        assert table.loc[0, "pending_message"] == CQ_MISSING_WL
        assert not table.loc[0, "admitted"] and table.loc[0, "suspended"]
    finally:
        client.delete("Job", "orphan-job", namespace="default", propagation_policy="Background",
                      missing_ok=True)
        client.delete("LocalQueue", "orphan", namespace="default", api_version=AV,
                      missing_ok=True)


@controlplane
def test_quota_for_a_resource_no_flavor_covers_is_refused(lab, client):
    def cq(name, resources):
        return {"apiVersion": AV, "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "h100", "resources": resources}]}]}}

    # one resource more than coveredResources: the CRD's validation rule, in the API server
    with pytest.raises(ApiError) as err:
        client.create(cq("extra-gpu", [{"name": "cpu", "nominalQuota": "8"},
                                       {"name": "nvidia.com/gpu", "nominalQuota": 8}]))
    assert err.value.code == 422
    assert str(err.value) == (
        'ClusterQueue.kueue.x-k8s.io "extra-gpu" is invalid: spec.resourceGroups[0]: Invalid '
        "value: flavors must have the same number of resources as the coveredResources")
    # as many resources, but not the covered one: Kueue's validating webhook
    with pytest.raises(ApiError) as err:
        client.create(cq("gpu-not-covered", [{"name": "nvidia.com/gpu", "nominalQuota": 8}]))
    assert err.value.code == 403
    assert str(err.value) == (
        'admission webhook "vclusterqueue.kb.io" denied the request: '
        'spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "nvidia.com/gpu": '
        "must match the name in coveredResources")


@controlplane
def test_up_starts_a_killed_kueue_again(lab, env):
    pid = kueue.status(lab)["kueue"].pid
    os.kill(pid, signal.SIGKILL)
    _until(lambda: not procs.alive(pid), 10, "kueue to exit")
    assert kueue.status(lab)["kueue"].state == "stopped"
    with pytest.raises(GpuLabError, match=r"kueue is not running; `gpu-lab up --name kq` starts it"):
        lab.check_ready()
    res = _gpu_lab(env, "up", "--name", LAB)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kueue: the API server reaches its webhooks" in res.stdout
    st = kueue.status(lab)["kueue"]
    assert st.state == "healthy" and st.pid != pid
