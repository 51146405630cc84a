"""``gpu-lab kind build`` and ``gpu-lab kind engine`` without Docker: the sandbox runtime
(``engine``, ``runc_shim``), the containerd config change on kind's real config, the Go tools'
binary names, and the control-plane images named as kubeadm asks for them.

The images themselves are built and run in ``test_kind_cluster`` (marker ``kind``).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_lab.backends.kind import KindError, engine, runc_shim
from gpu_lab.backends.kind import build as kb

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SHIM = Path(runc_shim.__file__)


def _missing(msg: str) -> None:
    """In CI what a test needs must be there (fail); elsewhere skip with the reason."""
    if CI:
        pytest.fail(f"{msg}; CI=true, so this test must run")
    pytest.skip(msg)


# =========================================================================== engine

ALL_CAPS = 0x000001FFFFFFFFFF  # CAP_CHOWN .. CAP_CHECKPOINT_RESTORE (40)
NO_SYS_RESOURCE = ALL_CAPS & ~(1 << 24)


def _status(capbnd: int | None) -> str:
    lines = ["Name:\tpython3", "Umask:\t0022", "State:\tR (running)", "CapInh:\t0000000000000000",
             "CapPrm:\t000001ffffffffff", "CapEff:\t000001ffffffffff"]
    if capbnd is not None:
        lines.append(f"CapBnd:\t{capbnd:016x}")
    lines += ["CapAmb:\t0000000000000000", "NoNewPrivs:\t0", "Seccomp:\t0"]
    return "\n".join(lines) + "\n"


def test_bounding_set_and_whether_the_sandbox_runtime_is_needed():
    assert engine.CAP_SYS_RESOURCE == 24
    assert engine.bounding_set(_status(ALL_CAPS)) == ALL_CAPS
    assert engine.needs_sandbox_runtime(_status(ALL_CAPS)) is False
    assert engine.bounding_set(_status(NO_SYS_RESOURCE)) == 0x000001FFFEFFFFFF
    assert engine.needs_sandbox_runtime(_status(NO_SYS_RESOURCE)) is True
    only_24 = 1 << 24  # everything else missing: still not this runtime's business
    assert engine.needs_sandbox_runtime(_status(only_24)) is False
    assert engine.bounding_set(_status(None)) is None  # unreadable: never assume it is needed
    assert engine.needs_sandbox_runtime(_status(None)) is False


def test_bounding_set_of_this_process():
    if not sys.platform.startswith("linux"):
        pytest.skip("/proc/self/status is Linux's")
    text = Path("/proc/self/status").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("CapBnd:")]
    assert engine.bounding_set() == int(line.split()[1], 16)
    assert engine.needs_sandbox_runtime() is engine.needs_sandbox_runtime(text)


def test_daemon_config_keeps_existing_keys_and_sets_the_default_runtime(tmp_path):
    existing = {"log-driver": "json-file", "default-runtime": "runc",
                "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}},
                "storage-driver": "vfs"}
    before = json.loads(json.dumps(existing))
    shim = tmp_path / "gpu-lab-runc"
    out = engine.daemon_config(existing, shim)
    assert out == {
        "log-driver": "json-file",
        "default-runtime": "gpu-lab-runc",
        "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"},
                     "gpu-lab-runc": {"path": str(shim)}},
        "storage-driver": "vfs",
    }
    assert existing == before  # the caller's dict is not changed
    assert engine.daemon_config({}, shim) == {"runtimes": {"gpu-lab-runc": {"path": str(shim)}},
                                              "default-runtime": "gpu-lab-runc"}
    assert engine.daemon_config({"runtimes": None}, shim)["runtimes"] == {
        "gpu-lab-runc": {"path": str(shim)}}


def test_write_daemon_json_installs_the_runtime_and_registers_it(tmp_path):
    daemon = tmp_path / "etc" / "docker" / "daemon.json"
    daemon.parent.mkdir(parents=True)
    daemon.write_text('{"debug": true, "storage-driver": "vfs"}\n')
    shim_dir = tmp_path / "cache" / "kind"
    msg = engine.write_daemon_json(daemon, shim_dir, force=True)
    shim = shim_dir / "gpu-lab-runc"
    assert json.loads(daemon.read_text()) == {
        "debug": True, "storage-driver": "vfs",
        "runtimes": {"gpu-lab-runc": {"path": str(shim)}},
        "default-runtime": "gpu-lab-runc",
    }
    assert msg == f"{daemon}: default runtime gpu-lab-runc ({shim}); restart dockerd to use it"
    assert shim.read_bytes() == SHIM.read_bytes()
    mode = shim.stat().st_mode
    assert stat.S_IMODE(mode) == 0o755 and stat.S_ISREG(mode)
    assert shim.read_text().startswith("#!/usr/bin/python3\n")
    # again: idempotent
    engine.write_daemon_json(daemon, shim_dir, force=True)
    assert json.loads(daemon.read_text())["runtimes"] == {"gpu-lab-runc": {"path": str(shim)}}
    # no daemon.json yet: made
    fresh = tmp_path / "new" / "daemon.json"
    engine.write_daemon_json(fresh, shim_dir, force=True)
    assert json.loads(fresh.read_text()) == {"runtimes": {"gpu-lab-runc": {"path": str(shim)}},
                                             "default-runtime": "gpu-lab-runc"}


def test_write_daemon_json_refuses_a_broken_file_and_leaves_it(tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text("{not json")
    with pytest.raises(KindError, match=r"daemon\.json is not valid JSON: fix or remove it first"):
        engine.write_daemon_json(daemon, tmp_path / "shim", force=True)
    assert daemon.read_text() == "{not json"


def test_write_daemon_json_writes_nothing_where_not_needed(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "needs_sandbox_runtime", lambda status=None: False)
    daemon = tmp_path / "daemon.json"
    msg = engine.write_daemon_json(daemon, tmp_path / "shim")
    assert msg.startswith("no sandbox runtime needed") and "untouched" in msg
    assert not daemon.exists() and not (tmp_path / "shim").exists()


# =========================================================================== runc_shim

OTHER_CAPS = ["CAP_CHOWN", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"]


def _caps(with_resource: bool = True) -> dict:
    caps = OTHER_CAPS[:2] + (["CAP_SYS_RESOURCE"] if with_resource else []) + OTHER_CAPS[2:]
    return {name: list(caps) for name in runc_shim.SETS}


def _config(with_resource: bool = True) -> dict:
    return {"ociVersion": "1.2.0",
            "process": {"args": ["/sbin/init"], "cwd": "/", "capabilities": _caps(with_resource)},
            "root": {"path": "rootfs"}, "hostname": "gpu-lab-worker"}


def test_drop_caps_removes_only_cap_sys_resource_from_every_set():
    assert runc_shim.SETS == ("bounding", "effective", "inheritable", "permitted", "ambient")
    process = {"args": ["sh"], "capabilities": _caps()}
    assert runc_shim.drop_caps(process) is True
    assert process == {"args": ["sh"], "capabilities": {s: OTHER_CAPS for s in runc_shim.SETS}}
    assert runc_shim.drop_caps(process) is False  # nothing left to drop
    partial = {"capabilities": {"bounding": ["CAP_SYS_RESOURCE", "CAP_KILL"], "ambient": []}}
    assert runc_shim.drop_caps(partial) is True
    assert partial == {"capabilities": {"bounding": ["CAP_KILL"], "ambient": []}}
    assert runc_shim.drop_caps({"args": ["sh"]}) is False
    assert runc_shim.drop_caps({"capabilities": None}) is False


def _bundle(tmp_path: Path, name: str = "bundle", with_resource: bool = True) -> Path:
    bundle = tmp_path / name
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_config(with_resource), indent=2))
    return bundle


# how containerd's runc shim calls runc: global options, then the subcommand
GLOBAL = ["--root", "/run/containerd/runc/moby", "--log", "/run/containerd/log.json",
          "--log-format", "json", "--systemd-cgroup"]


def test_adjust_create_edits_the_bundles_config(tmp_path):
    bundle = _bundle(tmp_path)
    runc_shim.adjust([*GLOBAL, "create", "--bundle", str(bundle), "--pid-file",
                      str(tmp_path / "pid"), "--console-socket", "/tmp/sock", "c0ffee"])
    doc = json.loads((bundle / "config.json").read_text())
    want = _config()
    want["process"]["capabilities"] = {s: OTHER_CAPS for s in runc_shim.SETS}
    assert doc == want


@pytest.mark.parametrize("spelling", [["--bundle={}"], ["-b", "{}"], ["-b={}"]])
def test_adjust_run_with_every_bundle_spelling(tmp_path, spelling):
    bundle = _bundle(tmp_path)
    args = [a.format(bundle) for a in spelling]
    runc_shim.adjust(["--debug", "run", *args, "--detach", "c0ffee"])
    doc = json.loads((bundle / "config.json").read_text())
    assert all("CAP_SYS_RESOURCE" not in v for v in doc["process"]["capabilities"].values())


def test_adjust_create_without_bundle_uses_the_working_directory(tmp_path, monkeypatch):
    bundle = _bundle(tmp_path)
    monkeypatch.chdir(bundle)
    runc_shim.adjust(["--root", "/run/runc", "create", "c0ffee"])
    doc = json.loads((bundle / "config.json").read_text())
    assert doc["process"]["capabilities"]["bounding"] == OTHER_CAPS


def test_adjust_leaves_files_it_has_nothing_to_change_in(tmp_path, monkeypatch):
    bundle = _bundle(tmp_path, with_resource=False)
    text = (bundle / "config.json").read_text()
    runc_shim.adjust([*GLOBAL, "create", "--bundle", str(bundle), "c0ffee"])
    assert (bundle / "config.json").read_text() == text  # not even reformatted
    other = _bundle(tmp_path, "other")
    text = (other / "config.json").read_text()
    monkeypatch.chdir(other)
    for args in ([*GLOBAL, "start", "c0ffee"], [*GLOBAL, "delete", "--force", "c0ffee"],
                 [*GLOBAL, "state", "c0ffee"], ["--version"], []):
        runc_shim.adjust(args)
    assert (other / "config.json").read_text() == text
    runc_shim.adjust(["create", "--bundle", str(tmp_path / "absent"), "x"])  # runc's to report
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{")
    runc_shim.adjust(["create", "--bundle", str(tmp_path / "bad"), "x"])
    assert (tmp_path / "bad" / "config.json").read_text() == "{"


def test_adjust_exec_edits_the_process_file(tmp_path):
    bundle = _bundle(tmp_path)
    bundle_text = (bundle / "config.json").read_text()
    process = tmp_path / "runc-process123"
    process.write_text(json.dumps({"args": ["sh"], "cwd": "/", "capabilities": _caps()}))
    runc_shim.adjust([*GLOBAL, "exec", "--process", str(process), "--detach", "--pid-file",
                      str(tmp_path / "pid"), "c0ffee"])
    assert json.loads(process.read_text()) == {
        "args": ["sh"], "cwd": "/", "capabilities": {s: OTHER_CAPS for s in runc_shim.SETS}}
    assert (bundle / "config.json").read_text() == bundle_text
    short = tmp_path / "p2.json"
    short.write_text(json.dumps({"capabilities": _caps()}))
    runc_shim.adjust(["exec", "-p", str(short), "c0ffee"])
    assert json.loads(short.read_text())["capabilities"]["ambient"] == OTHER_CAPS


FAKE_RUNC = """#!/bin/sh
for a in "$@"; do printf '[%s]\\n' "$a"; done
exit 7
"""


def _fake_runc(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    runc = d / "runc"
    runc.write_text(FAKE_RUNC)
    runc.chmod(0o755)
    return runc


def _run_shim(script: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_shim_script_execs_the_real_runc_with_unchanged_args(tmp_path):
    bundle = _bundle(tmp_path)
    runc = _fake_runc(tmp_path / "real")
    args = [*GLOBAL, "create", "--bundle", str(bundle), "--pid-file", str(tmp_path / "pid"),
            "arg with spaces", "c0ffee"]
    env = {"PATH": "/usr/bin:/bin", "GPU_LAB_REAL_RUNC": str(runc)}
    res = _run_shim(SHIM, args, env)
    assert res.returncode == 7, res.stderr  # the real runc's own exit status: exec'd
    assert res.stdout.splitlines() == [f"[{a}]" for a in args]
    doc = json.loads((bundle / "config.json").read_text())  # edited before the hand-over
    assert all("CAP_SYS_RESOURCE" not in v for v in doc["process"]["capabilities"].values())


def test_shim_finds_the_real_runc_on_path_skipping_itself(tmp_path):
    """Installed (executable) and linked as ``runc`` first on PATH, the runtime hands over
    to the next ``runc``, not to itself."""
    first = tmp_path / "first"
    installed = engine.install_shim(first)
    (first / "runc").symlink_to(installed)
    assert os.access(first / "runc", os.X_OK)
    runc = _fake_runc(tmp_path / "second")
    env = {"PATH": f"{first}:{runc.parent}"}
    res = _run_shim(first / "runc", ["--version"], env)
    assert (res.returncode, res.stdout) == (7, "[--version]\n"), res.stderr


# =========================================================================== containerd


def _kind_containerd_config() -> str:
    try:
        d = kb.kind_module_dir()
    except (KindError, OSError) as err:  # no Go, or the module cannot be downloaded
        _missing(f"kind {kb.KIND_RELEASE}'s module is not available: {err}")
    return (d / "images" / "base" / "files" / "etc" / "containerd" / "config.toml").read_text()


CRI = "io.containerd.grpc.v1.cri"


def test_containerd_config_on_kinds_real_config():
    import tomllib  # Python 3.11+, as the build itself

    kind_text = _kind_containerd_config()
    out = kb.containerd_config(kind_text)
    assert out.endswith(kb.CONTAINERD_EXTRA)
    got = tomllib.loads(out)
    cri = got["plugins"][CRI]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10.2"
    assert cri["sandbox_image"] == f"{kb.IMAGE_REGISTRY}/pause:{kb.PAUSE_VERSION}"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d",
                          "conf_template": "/etc/containerd/cni-template.json"}
    # nothing else changes
    want = tomllib.loads(kind_text)
    assert want["plugins"][CRI]["sandbox_image"] != cri["sandbox_image"]
    assert want["plugins"][CRI]["restrict_oom_score_adj"] is False
    want["plugins"][CRI].update(sandbox_image=cri["sandbox_image"], restrict_oom_score_adj=True,
                                cni=cri["cni"])
    assert got == want
    changed = [(a, b) for a, b in zip(kind_text.splitlines(), out.splitlines()) if a != b]
    assert changed == [
        ('  sandbox_image = "registry.k8s.io/pause:3.10"',
         '  sandbox_image = "registry.k8s.io/pause:3.10.2"'),
        ("  restrict_oom_score_adj = false", "  restrict_oom_score_adj = true"),
    ]  # indentation kept


def test_containerd_config_without_the_settings_to_change_is_refused():
    import tomllib

    base = '[plugins."io.containerd.grpc.v1.cri"]\n'
    with pytest.raises(KindError, match=r"containerd config has no sandbox, oom setting to change"):
        kb.containerd_config(base + "  enable_selinux = false\n")
    with pytest.raises(KindError, match=r"has no oom setting to change: the pinned kind module"):
        kb.containerd_config(base + '  sandbox_image = "x"\n')
    with pytest.raises(KindError, match=r"has no sandbox setting to change"):
        kb.containerd_config(base + "  restrict_oom_score_adj = false\n")
    out = kb.containerd_config(base + '  sandbox_image = "x"\n  restrict_oom_score_adj = false\n')
    assert tomllib.loads(out)["plugins"][CRI]["restrict_oom_score_adj"] is True


def test_cni_template_renders_to_a_ptp_config():
    """containerd fills in the node's pod CIDRs (Go template); the rest is JSON as it is."""
    loop = re.search(r"\{\{range \$i, \$range := \.PodCIDRRanges\}\}(.*)\{\{end\}\}",
                     kb.CNI_TEMPLATE)
    assert loop, "the template loops over .PodCIDRRanges"

    def render(cidrs: list[str]) -> dict:
        body = loop.group(1)
        items = [body.replace("{{if $i}}, {{end}}", ", " if i else "").replace("{{$range}}", c)
                 for i, c in enumerate(cidrs)]
        return json.loads(kb.CNI_TEMPLATE.replace(loop.group(0), "".join(items)))

    conf = render(["10.244.1.0/24"])
    ptp, portmap = conf["plugins"]
    assert (conf["cniVersion"], ptp["type"], portmap["type"]) == ("1.0.0", "ptp", "portmap")
    assert ptp["ipam"]["type"] == "host-local"
    assert ptp["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24"}]]
    assert render(["10.244.1.0/24", "fd00:10:244:1::/64"])["plugins"][0]["ipam"]["ranges"] == [
        [{"subnet": "10.244.1.0/24"}], [{"subnet": "fd00:10:244:1::/64"}]]


# =========================================================================== Go tools, images


def test_go_tools_binary_names():
    assert {t.name: t.binaries() for t in kb.GO_TOOLS} == {
        "kind": ["kind"],
        "containerd": ["containerd", "ctr", "containerd-shim-runc-v2"],
        "crictl": ["crictl"],
    }
    assert {t.name: t.version for t in kb.GO_TOOLS} == {
        "kind": "v0.33.0", "containerd": "v2.3.4", "crictl": "v1.37.0"}


def test_tool_path_looks_in_the_build_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path))
    assert kb.tool_path("ctr") is None
    ctr = tmp_path / "bin" / "containerd-v2.3.4" / "ctr"
    ctr.parent.mkdir(parents=True)
    ctr.write_text("")
    assert kb.tool_path("ctr") == ctr
    kubeadm = tmp_path / "bin" / "k8s-v1.37.2" / "kubeadm"
    assert kb.tool_path("kubeadm") is None
    kubeadm.parent.mkdir(parents=True)
    kubeadm.write_text("")
    assert kb.tool_path("kubeadm") == kubeadm
    assert kb.tool_path("docker") is None


@pytest.mark.kind  # runs the built kubeadm
def test_component_images_are_the_ones_kubeadm_asks_for(tmp_path):
    """``kubeadm config images list`` of the built kubeadm, less kube-proxy and CoreDNS (the
    clusters run neither)."""
    kubeadm = kb.tool_path("kubeadm")
    if kubeadm is None:
        _missing("kubeadm is not built (run `gpu-lab kind build`)")
    res = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version",
                          kb.KUBERNETES_VERSION], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    listed = res.stdout.split()
    assert any("/kube-proxy:" in i for i in listed) and any("/coredns" in i for i in listed)
    wanted = [i for i in listed if "/kube-proxy:" not in i and "/coredns" not in i]
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
    bins = {n: tmp_path / n for n in names}
    pause = tmp_path / "pause"
    images = kb.component_images(bins, pause)
    assert sorted(images) == sorted(wanted)
    for image, (binary, target) in images.items():
        name = image.rsplit("/", 1)[1].split(":")[0]
        if name == "pause":
            assert (binary, target) == (pause, "/pause")
        else:
            assert (binary, target) == (bins[name], f"/usr/local/bin/{name}")


def test_build_prints_each_step_and_where_its_time_went(tmp_path, monkeypatch):
    """A cold build's log says which step took the minutes: a step of 5 s or more prints its
    time as it ends, and the last line lists every step's."""
    clock = [0.0]
    monkeypatch.setattr(kb.time, "monotonic", lambda: clock[0])

    def takes(seconds, value=None):
        def run(*_a, **_k):
            clock[0] += seconds
            return value
        return run

    monkeypatch.setattr(kb, "require_docker", lambda: None)
    monkeypatch.setattr(kb, "work_dir", lambda: tmp_path)
    monkeypatch.setattr(kb.cpbuild, "build", takes(600, {}))
    monkeypatch.setattr(kb, "build_go_tools", takes(100, {}))
    monkeypatch.setattr(kb, "build_pause", takes(2, tmp_path / "pause"))
    monkeypatch.setattr(kb, "build_rootfs", takes(90))
    monkeypatch.setattr(kb, "component_images", lambda bins, pause: [])
    for name in ("build_component_images", "build_base", "build_node"):
        monkeypatch.setattr(kb, name, takes(10))
    monkeypatch.setattr(kb, "build_plugin_image", takes(27))
    lines: list[str] = []
    kb.build(tmp_path, progress=lines.append)
    assert [ln[:5] for ln in lines if ln.startswith("[") and not ln.endswith(" s")] == [
        f"[{n}/7]" for n in range(1, 8)]
    assert "[1/7] Go binaries: 700 s" in lines and "[3/7] root filesystem: 90 s" in lines
    assert not any(ln.startswith("[2/7] pause:") for ln in lines)  # 2 s: only in the totals
    assert lines[-1].startswith(
        "done in 849 s (Go binaries 700 s, pause 2 s, root filesystem 90 s, component images 10 s, "
        "base image 10 s, node image 10 s, plugin image 27 s): ")


def test_build_without_go_runs_only_the_steps_that_need_no_go_binary(tmp_path, monkeypatch):
    """`--no-go`, which .ci/run calls while the control plane compiles: pause, the root
    filesystem and the plugin image, never a Go build nor a step that needs its binaries."""
    ran: list[str] = []

    def records(name):
        def run(*_a, **_k):
            ran.append(name)
        return run

    def refused(*_a, **_k):
        raise AssertionError("a step that needs Go ran")

    monkeypatch.setattr(kb, "require_docker", lambda: None)
    monkeypatch.setattr(kb, "work_dir", lambda: tmp_path)
    for name in ("build_go_tools", "build_component_images", "build_base", "build_node"):
        monkeypatch.setattr(kb, name, refused)
    monkeypatch.setattr(kb.cpbuild, "build", refused)
    for name in ("build_pause", "build_rootfs", "build_plugin_image"):
        monkeypatch.setattr(kb, name, records(name))
    lines: list[str] = []
    kb.build(tmp_path, progress=lines.append, go=False)
    assert ran == ["build_pause", "build_rootfs", "build_plugin_image"]
    assert [ln for ln in lines if ln.startswith("[")] == [
        "[2/7] pause", "[3/7] root filesystem (Debian bookworm)", "[7/7] fake device plugin image"]
    assert lines[-1].startswith("the steps without Go done in ")
