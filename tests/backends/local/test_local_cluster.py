"""The local control plane: certificates, ports, pid files, kubeconfigs (no binaries), then
the real etcd, kube-apiserver, kube-controller-manager and kube-scheduler as processes.

The process tests share one lab (started once through the CLI, in a subprocess that
exits, so they also show the processes outlive the Python that started them) in a
temporary ``$GPU_LAB_HOME``. Without the binaries they skip, unless ``CI=true``: then
they fail, because CI must run them (``gpu-lab controlplane build`` makes them).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from realcluster import require_controlplane

from gpu_lab import processes as procs
from gpu_lab.backends.local import certs, labstate
from gpu_lab.backends.local import cluster as cl
from gpu_lab.backends.local import ports as portlib
from gpu_lab.backends.local.build import DEFAULT_VERSION
from gpu_lab.backends.local.cli import main as cli_main
from gpu_lab.kube import ApiError, KubeClient, NotFound
from gpu_lab.kube import kubeconfig as kc

REPO = Path(__file__).resolve().parents[3]
LINUX = sys.platform.startswith("linux")


controlplane = pytest.mark.controlplane


def _load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# =========================================================================== certificates


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return certs.ensure_pki(tmp_path_factory.mktemp("pki") / "pki")


def test_apiserver_cert_names_every_address_clients_use(pki):
    cert = _load_cert(pki.crt("apiserver"))
    dns, ips = certs.sans_of(cert)
    assert {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"} <= dns
    assert "kubernetes.default.svc.cluster.local" in dns
    assert {"127.0.0.1", "10.96.0.1"} <= ips
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    cert.verify_directly_issued_by(_load_cert(pki.ca_crt))


def test_service_ip_is_the_first_of_the_service_range():
    import ipaddress

    net = ipaddress.ip_network(certs.SERVICE_CIDR)
    assert str(next(net.hosts())) == certs.KUBERNETES_SERVICE_IP


@pytest.mark.parametrize(
    ("name", "cn", "orgs"),
    [
        ("admin", "gpu-lab-admin", ["system:masters"]),
        ("kube-scheduler", "system:kube-scheduler", []),
        ("kube-controller-manager", "system:kube-controller-manager", []),
        ("apiserver-etcd-client", "kube-apiserver-etcd-client", []),
    ],
)
def test_client_certificates_carry_kubernetes_identities(pki, name, cn, orgs):
    cert = _load_cert(pki.crt(name))
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [cn]
    got = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert got == orgs
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(_load_cert(pki.ca_crt))


def test_front_proxy_client_has_its_own_ca(pki):
    cert = _load_cert(pki.crt("front-proxy-client"))
    cert.verify_directly_issued_by(_load_cert(pki.front_proxy_ca_crt))
    assert cert.issuer != _load_cert(pki.ca_crt).subject


def test_ca_is_a_ca_and_leaves_are_not(pki):
    ca = _load_cert(pki.ca_crt)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    leaf = _load_cert(pki.crt("admin"))
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert leaf.not_valid_after_utc - dt.datetime.now(dt.timezone.utc) > dt.timedelta(days=300)


def test_every_file_is_private(pki):
    assert stat.S_IMODE(pki.dir.stat().st_mode) == 0o700
    files = list(pki.dir.iterdir())
    assert {p.name for p in files} >= {"ca.crt", "ca.key", "admin.key", "sa.key", "sa.pub"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name


def test_service_account_pair_matches(pki):
    key = serialization.load_pem_private_key(pki.sa_key.read_bytes(), None)
    pub = serialization.load_pem_public_key(pki.sa_pub.read_bytes())
    assert key.public_key().public_numbers() == pub.public_numbers()


def test_ensure_pki_is_idempotent_and_repairs(tmp_path):
    d = tmp_path / "pki"
    certs.ensure_pki(d)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    certs.ensure_pki(d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before

    (d / "kube-scheduler.key").unlink()  # a lost key: that pair is remade, nothing else
    (d / "admin.crt").chmod(0o644)
    certs.ensure_pki(d)
    after = {p.name: p.read_bytes() for p in d.iterdir()}
    changed = {n for n in after if after[n] != before.get(n)}
    assert changed == {"kube-scheduler.crt", "kube-scheduler.key"}
    assert stat.S_IMODE((d / "admin.crt").stat().st_mode) == 0o600


def test_a_new_ca_reissues_its_leaves(tmp_path):
    d = tmp_path / "pki"
    pki = certs.ensure_pki(d)
    old_admin = pki.crt("admin").read_bytes()
    old_proxy = pki.crt("front-proxy-client").read_bytes()
    pki.ca_key.unlink()
    certs.ensure_pki(d)
    assert pki.crt("admin").read_bytes() != old_admin
    _load_cert(pki.crt("admin")).verify_directly_issued_by(_load_cert(pki.ca_crt))
    assert pki.crt("front-proxy-client").read_bytes() == old_proxy  # other CA: kept


def test_a_leaf_with_other_sans_is_reissued(tmp_path):
    d = tmp_path / "pki"
    pki = certs.ensure_pki(d)
    narrow = certs.LeafSpec("apiserver", "kube-apiserver", ips=("127.0.0.1",))
    certs.ensure_pki(d, leaves=[narrow])
    assert certs.sans_of(_load_cert(pki.crt("apiserver")))[1] == {"127.0.0.1"}
    certs.ensure_pki(d)
    assert "10.96.0.1" in certs.sans_of(_load_cert(pki.crt("apiserver")))[1]


# =========================================================================== helpers


def test_pick_port_keeps_a_free_preferred_port_and_avoids_a_busy_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert not portlib.port_free(busy)
        other = portlib.pick_port(busy)
        assert other != busy and portlib.port_free(other)
    free = portlib.pick_port()
    assert portlib.pick_port(free) == free
    assert portlib.pick_port(free, avoid={free}) != free


def test_kubeconfig_round_trip(tmp_path):
    text = kc.render(
        "https://127.0.0.1:1234", tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key", "u"
    )
    path = kc.write(tmp_path / "kubeconfig", text)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # a file the kubeconfig names must exist, as for kubectl: one line when it does not
    with pytest.raises(kc.KubeconfigError, match=f"File does not exist: {tmp_path / 'ca.crt'}"):
        kc.load(path)
    for name in ("ca.crt", "a.crt", "a.key"):
        (tmp_path / name).write_text("PEM")
    creds = kc.load(path)
    assert creds.server == "https://127.0.0.1:1234"
    assert creds.ca_file == str(tmp_path / "ca.crt")
    assert (creds.cert_file, creds.key_file) == (str(tmp_path / "a.crt"), str(tmp_path / "a.key"))


def test_kubeconfig_with_embedded_data(tmp_path):
    import base64

    import yaml

    b64 = base64.b64encode(b"PEM").decode()
    doc = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://x", "certificate-authority-data": b64}}
        ],
        "users": [{"name": "u", "user": {"client-certificate-data": b64, "client-key-data": b64}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    (tmp_path / "k").write_text(yaml.safe_dump(doc))
    creds = kc.load(tmp_path / "k")
    assert Path(creds.ca_file).read_bytes() == b"PEM"
    assert stat.S_IMODE(Path(creds.key_file).stat().st_mode) == 0o600
    with pytest.raises(kc.KubeconfigError, match="no context named 'nope'"):
        kc.load(tmp_path / "k", context="nope")


def test_client_resolves_kinds_without_a_server():
    k = KubeClient(kc.Credentials(server="https://127.0.0.1:1"))
    assert k.resource("Pod").path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert k.resource("nodes").path(None, "n") == "/api/v1/nodes/n"
    assert k.resource("job").path("a") == "/apis/batch/v1/namespaces/a/jobs"
    assert k.resource("Lease").api_version == "coordination.k8s.io/v1"
    assert k.resource("priorityclass").namespaced is False
    assert not k.configuration.proxy  # loopback: never through a proxy


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_a_pid_counts_only_when_it_is_our_binary_in_our_lab(tmp_path):
    marker = str(tmp_path) + os.sep
    argv = [sys.executable, "-c", "import time; time.sleep(30)", marker]
    name = os.path.basename(sys.executable)
    pid, started = procs.spawn(argv, tmp_path / "sleep.log")
    try:
        assert procs.is_ours(pid, name, marker, started)
        assert not procs.is_ours(pid, name, "/elsewhere/", started)
        assert not procs.is_ours(pid, "etcd", marker, started)
        assert not procs.is_ours(pid, name, marker, started + 1)  # pid reused
        assert procs.find(name, marker) == [pid]
        assert procs.stop([pid], {pid: name}, marker, timeout=5) == {pid: "terminated"}
        assert not procs.is_ours(pid, name, marker)
    finally:
        procs._signal(pid, signal.SIGKILL)


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_a_child_still_in_exec_counts_as_ours(tmp_path, monkeypatch):
    """Popen returns before the kernel sets the new argv: /proc/<pid>/cmdline is empty
    for a moment. A check in that window once started kube-scheduler a second time."""
    marker = str(tmp_path) + os.sep
    argv = [sys.executable, "-c", "import time; time.sleep(30)", marker]
    name = os.path.basename(sys.executable)
    pid, started = procs.spawn(argv, tmp_path / "sleep.log")
    try:
        monkeypatch.setattr(procs, "cmdline", lambda _pid: None)  # the exec window
        assert procs.is_ours(pid, name, marker, started)
        assert procs.find(name, marker) == [pid]
        assert not procs.is_ours(pid, "kube-scheduler", marker, started)
        assert not procs.is_ours(pid, name, "/elsewhere/", started)
        assert not procs.is_ours(pid, name, marker, started + 1)
        procs._signal(pid, signal.SIGKILL)
        procs.wait_gone(pid, started, 5)
        assert not procs.is_ours(pid, name, marker, started)  # reaped: no longer a child
    finally:
        procs._signal(pid, signal.SIGKILL)


@pytest.mark.skipif(not LINUX, reason="/proc")
def test_status_calls_a_stale_pid_file_stopped(tmp_path):
    lab = cl.LocalCluster("stale", root=tmp_path)
    lab.pids_dir.mkdir(parents=True)
    lab.pid_path("etcd").write_text(f"{os.getpid()}\n")  # alive, but not etcd
    lab.pid_path("kube-scheduler").write_text("not a pid\n")
    st = lab.status()
    assert {s.state for s in st.values()} == {"stopped"}
    assert st["etcd"].pid is None and "stale pid file" in st["etcd"].detail
    with pytest.raises(cl.LocalClusterError, match="run `gpu-lab up`"):
        lab.connect()
    assert lab.down(progress=None) == {}  # nothing of ours to stop; this pytest survives


def test_up_without_binaries_says_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setattr(labstate, "find_binaries", lambda *a, **k: None)
    with pytest.raises(cl.LocalClusterError, match="gpu-lab controlplane build"):
        cl.LocalCluster("nobin", root=tmp_path).up(progress=None)


def test_lab_directory_follows_gpu_lab_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_HOME", str(tmp_path))
    lab = cl.LocalCluster("x")
    assert lab.dir == tmp_path / "clusters" / "x"
    assert lab.kubeconfig() == tmp_path / "clusters" / "x" / "kubeconfig"
    with pytest.raises(cl.LocalClusterError, match="invalid lab name"):
        cl.LocalCluster("../etc")


def test_cli_on_a_lab_that_never_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPU_LAB_HOME", str(tmp_path))
    assert cli_main(["status", "--name", "never"]) == 1
    assert "lab 'never' does not exist" in capsys.readouterr().out
    assert cli_main(["kubeconfig", "--name", "never"]) == 1
    assert cli_main(["down", "--name", "never"]) == 0
    with pytest.raises(SystemExit) as exc:
        cli_main(["logs", "nope"])
    assert exc.value.code == 2


# =========================================================================== real processes


def _binaries_or_skip() -> dict:
    return require_controlplane("the local control plane tests")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    _binaries_or_skip()
    return tmp_path_factory.mktemp("gpu-lab-home")


@pytest.fixture(scope="module")
def started(home):
    """One lab for the module, started by ``gpu-lab up`` in a Python process that exits."""
    env = {**os.environ, "GPU_LAB_HOME": str(home), "PYTHONPATH": str(REPO)}
    lab = cl.LocalCluster("t", root=home)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "gpu_lab.backends.local.cli", "up", "--name", "t"],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert "control plane ready in" in res.stdout
        yield lab
    finally:
        lab.down(progress=None)
    for c in cl.COMPONENTS:
        assert procs.find(c, lab._marker) == []


@pytest.fixture
def lab(started):
    """The module's lab, repaired if a previous test left it partly down."""
    return started.up(progress=None)


def _pids(lab) -> dict:
    return {c: s.pid for c, s in lab.status(check_health=False).items()}


def _kill9(pid: int) -> None:
    """SIGKILL and wait until the process has fully exited (its sockets closed)."""
    started = procs.start_time(pid)
    os.kill(pid, signal.SIGKILL)
    assert procs.wait_gone(pid, started, 10.0)


def _wait_state(lab, component, state, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = lab.status()[component]
        if s.state == state:
            return s
        time.sleep(0.1)
    raise AssertionError(f"{component} not {state}: {lab.status()[component]}")


@controlplane
def test_processes_outlive_the_python_that_started_them(started):
    lab = cl.LocalCluster("t", root=started.dir.parent.parent).connect()  # a fresh kernel
    st = lab.status()
    assert {s.state for s in st.values()} == {"healthy"}, st
    for s in st.values():
        assert s.pid and os.getpgid(s.pid) == s.pid  # own process group, own session


@controlplane
def test_apiserver_answers_version_with_the_pinned_release(lab):
    with lab.client() as kube:
        assert kube.server_version()["gitVersion"] == DEFAULT_VERSION
    creds = kc.load(lab.kubeconfig())
    assert lab.kubeconfig().parent == lab.dir
    assert creds.server.startswith("https://127.0.0.1:")


def _listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(hex address, port) of every TCP socket ``pid`` has in LISTEN state (Linux)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                addr, port = f[1].rsplit(":", 1)
                out.append((addr, int(port, 16)))
    return out


@controlplane
def test_every_listener_is_on_127_0_0_1_and_a_recorded_port(lab):
    ports = set(lab.ports().values())
    for c, s in lab.status(check_health=False).items():
        socks = _listening_sockets(s.pid)
        assert socks, c
        for addr, port in socks:
            assert addr == "0100007F", f"{c} listens on {addr}:{port}"  # 127.0.0.1
            assert port in ports, f"{c} listens on an unrecorded port {port}"


@controlplane
def test_create_namespace_and_node_and_the_scheduler_binds_a_pod(lab):
    kube = lab.client()
    ns = kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns["status"]["phase"] == "Active"
    alloc = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "h100-0",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            },
        }
    )
    kube.patch(
        "Node",
        "h100-0",
        {"status": {"capacity": alloc, "allocatable": alloc}},
        subresource="status",
    )
    assert kube.get("Node", "h100-0")["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert [n["metadata"]["name"] for n in kube.list("nodes")["items"]] == ["h100-0"]
    # the same client through the official package's typed API, as learners write it at work
    from kubernetes import client as k8s

    typed = k8s.CoreV1Api(kube.api).read_node("h100-0")
    assert typed.status.allocatable["nvidia.com/gpu"] == "8"
    with pytest.raises(ApiError, match='namespaces "team-a" already exists'):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})

    # the controller-manager makes the namespace's default ServiceAccount, which admission needs
    deadline = time.monotonic() + 15
    while True:
        try:
            kube.get("ServiceAccount", "default", "team-a")
            break
        except NotFound:
            assert time.monotonic() < deadline, "no default ServiceAccount: controller-manager?"
            time.sleep(0.1)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    rv = kube.list("pods", namespace="team-a")["metadata"]["resourceVersion"]
    kube.create(pod)
    bound = None
    for ev in kube.watch("pods", namespace="team-a", resource_version=rv, timeout_seconds=15):
        if ev.object["spec"].get("nodeName"):
            bound = ev.object["spec"]["nodeName"]
            break
    assert bound == "h100-0"
    kube.delete("Pod", "train", "team-a", grace_period_seconds=0)
    kube.delete("Node", "h100-0")
    with pytest.raises(NotFound):
        kube.get("Node", "h100-0")
    assert kube.delete("Node", "h100-0", missing_ok=True) is None


@controlplane
def test_status_shows_all_healthy(lab, monkeypatch, capsys):
    st = lab.status()
    assert [s.state for s in st.values()] == ["healthy"] * 4
    assert all(s.port and s.pid for s in st.values())
    monkeypatch.setenv("GPU_LAB_HOME", str(lab.dir.parent.parent))
    assert cli_main(["status", "--name", "t"]) == 0
    out = capsys.readouterr().out
    assert out.count("healthy") == 4 and str(lab.kubeconfig()) in out
    assert cli_main(["kubeconfig", "--name", "t"]) == 0
    assert capsys.readouterr().out.strip() == str(lab.kubeconfig())
    assert cli_main(["logs", "apiserver", "--name", "t", "--tail", "3"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3


@controlplane
def test_a_frozen_component_is_unhealthy(lab):
    pid = lab.status()["kube-scheduler"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        s = lab.status()["kube-scheduler"]
        assert s.state == "unhealthy" and s.pid == pid and "/healthz" in s.detail
    finally:
        os.kill(pid, signal.SIGCONT)
    _wait_state(lab, "kube-scheduler", "healthy")


@controlplane
def test_killed_scheduler_is_restarted_alone(lab):
    before = _pids(lab)
    _kill9(before["kube-scheduler"])
    _wait_state(lab, "kube-scheduler", "stopped")
    lab.up(progress=None)
    after = _pids(lab)
    assert after["kube-scheduler"] != before["kube-scheduler"]
    assert {c: after[c] for c in after if c != "kube-scheduler"} == {
        c: before[c] for c in before if c != "kube-scheduler"
    }
    assert lab.status()["kube-scheduler"].state == "healthy"


@controlplane
def test_a_taken_port_moves_the_component(lab):
    st = lab.status()
    old_port, old_pid = st["kube-controller-manager"].port, st["kube-controller-manager"].pid
    _kill9(old_pid)
    _wait_state(lab, "kube-controller-manager", "stopped")
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", old_port))
        squatter.listen()
        lines: list[str] = []
        lab.up(progress=lines.append)
    assert any(f"port {old_port} is in use" in ln for ln in lines), lines
    s = lab.status()["kube-controller-manager"]
    assert s.state == "healthy" and s.port != old_port


@controlplane
def test_killed_apiserver_is_restarted_alone_on_its_port(lab):
    before = _pids(lab)
    port = lab.ports()["kube-apiserver"]
    _kill9(before["kube-apiserver"])
    lab.up(progress=None)
    after = _pids(lab)
    assert after["kube-apiserver"] != before["kube-apiserver"]
    assert lab.ports()["kube-apiserver"] == port
    assert {s.state for s in lab.status().values()} == {"healthy"}
    assert lab.client().server_version()["gitVersion"] == DEFAULT_VERSION


@controlplane
def test_etcd_moved_to_a_new_port_keeps_the_data(lab):
    kube = lab.client()
    kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"a": "1"}}
    )
    old = lab.ports()["etcd"]
    _kill9(lab.status()["etcd"].pid)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", old))
        squatter.listen()
        lines: list[str] = []
        lab.up(progress=lines.append)
    assert any("kube-apiserver: restarting" in ln for ln in lines), lines
    assert lab.ports()["etcd"] != old
    assert {s.state for s in lab.status().values()} == {"healthy"}
    assert lab.client().get("ConfigMap", "keep", "default")["data"] == {"a": "1"}


@controlplane
def test_scheduler_config_restarts_the_scheduler_with_it(lab):
    import yaml

    old_pid = lab.status()["kube-scheduler"].pid
    fit = {"scoringStrategy": {"type": "MostAllocated"}}
    profile = {"schedulerName": "default-scheduler"}
    profile["pluginConfig"] = [{"name": "NodeResourcesFit", "args": fit}]
    lab.set_scheduler_config({"profiles": [profile]}, progress=None)
    try:
        s = lab.status()["kube-scheduler"]
        assert s.state == "healthy" and s.pid != old_pid
        doc = yaml.safe_load((lab.config_dir / "kube-scheduler.yaml").read_text())
        assert doc["profiles"][0]["pluginConfig"][0]["args"] == fit
        assert doc["leaderElection"] == {"leaderElect": False}
        assert doc["clientConnection"]["kubeconfig"].startswith(str(lab.dir))
    finally:
        lab.set_scheduler_config(None, progress=None)
    doc = yaml.safe_load((lab.config_dir / "kube-scheduler.yaml").read_text())
    assert "profiles" not in doc
    assert lab.status()["kube-scheduler"].state == "healthy"


@controlplane
def test_stale_pid_files_are_cleaned(lab, tmp_path):
    decoy = subprocess.Popen(["sleep", "60"])  # a live process that is not the scheduler
    try:
        _kill9(lab.status()["kube-scheduler"].pid)
        _wait_state(lab, "kube-scheduler", "stopped")
        lab.pid_path("kube-scheduler").write_text(f"{decoy.pid}\n")
        s = lab.status()["kube-scheduler"]
        assert s.state == "stopped" and "stale pid file" in s.detail
        lines: list[str] = []
        lab.up(progress=lines.append)
        assert any("removing stale pid file" in ln for ln in lines), lines
        assert lab.status()["kube-scheduler"].state == "healthy"
        assert int(lab.pid_path("kube-scheduler").read_text()) != decoy.pid
        assert decoy.poll() is None  # never signalled
    finally:
        decoy.kill()
        decoy.wait()


@controlplane
def test_down_leaves_no_process_and_no_port(lab):
    pids = _pids(lab)
    ports = lab.ports()
    t0 = time.monotonic()
    result = lab.down(progress=None)
    assert time.monotonic() - t0 < 20
    assert set(result) == set(cl.COMPONENTS)
    for c, pid in pids.items():
        assert not procs.is_ours(pid, c, lab._marker)
        assert procs.find(c, lab._marker) == []
    for key, port in ports.items():
        assert portlib.port_free(port), f"{key} port {port} still bound"
    assert {s.state for s in lab.status().values()} == {"stopped"}
    assert not list(lab.pids_dir.glob("*.pid"))
    assert lab.down(progress=None) == {}
