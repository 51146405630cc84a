"""Tests for gpu_lab.backends.local.build and controlplane/gen_replaces.py.

None of them needs Go or the real binaries: fake ``go`` / ``kube-apiserver`` shell
scripts stand in for them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_lab.backends.local import build as b
from gpu_lab.backends.local import buildcli

REPO = Path(__file__).resolve().parents[3]
CONTROLPLANE = REPO / "controlplane"
VERSION = "v1.37.2"
ETCD = "v3.7.0"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fake binaries are sh scripts")


def _load_gen():
    spec = importlib.util.spec_from_file_location("gen_replaces", CONTROLPLANE / "gen_replaces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _load_gen()

# An excerpt of k8s.io/kubernetes' go.mod in both require forms, with pseudo-versions
# that merely start with v0.0.0 (they must not be replaced).
KUBE_GOMOD = """\
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require github.com/blang/semver/v4 v4.0.0

require (
\tgithub.com/JeffAshton/win_pdh v0.0.0-20161109143554-76bb4ee9f0ab
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tk8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad
\tk8s.io/utils v0.0.0-20260626114624-be93311217bd
\tk8s.io/apimachinery v0.0.0 // a comment
)

require k8s.io/kms v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)
"""


def _replace_lines(gomod: str) -> dict[str, str]:
    """``{old: 'new version'}`` from a go.mod's replace block."""
    return {
        m.group(1): f"{m.group(2)} {m.group(3)}"
        for m in re.finditer(r"^\s*(\S+)\s+=>\s+(\S+)\s+(v\S+)\s*$", gomod, re.M)
    }


def _write_exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_binary(path: Path, component: str, version: str = VERSION, etcd: str = ETCD) -> Path:
    if component == "etcd":
        text = f"etcd Version: {etcd.lstrip('v')}\\nGit SHA: fake\\nGo Version: go1.26.8"
    else:
        text = f"Kubernetes {version}"
    return _write_exe(path, f'printf "{text}\\n"')


def _fake_cache(root: Path, version: str = VERSION, etcd: str = ETCD) -> dict[str, Path]:
    dirs = b.output_dirs(version, root, etcd)
    return {c: _fake_binary(dirs[c] / c, c, version, etcd) for c in b.ALL}


@pytest.fixture
def no_go(tmp_path, monkeypatch):
    """PATH with sh but without go (or any kube binary)."""
    bindir = tmp_path / "nogo-bin"
    bindir.mkdir()
    for tool in ("sh", "printf"):
        found = [Path(d) / tool for d in ("/bin", "/usr/bin") if (Path(d) / tool).exists()]
        if found:
            (bindir / tool).symlink_to(found[0])
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


@pytest.fixture
def fake_go(tmp_path, monkeypatch):
    """A ``go`` that records its arguments and writes a fake binary to ``-o``."""
    bindir = tmp_path / "fakego-bin"
    calls = tmp_path / "go-calls.txt"
    script = f"""
echo "$@" >> {calls}
if [ "$1" = env ]; then echo go1.26.8; exit 0; fi
if [ "$1" = build ]; then
  out=""; prev=""; pkg=""
  for a in "$@"; do
    if [ "$prev" = "-o" ]; then out="$a"; fi
    prev="$a"; pkg="$a"
  done
  case "$pkg" in
    go.etcd.io/*) text="etcd Version: {ETCD.lstrip("v")}" ;;
    *) text="Kubernetes {VERSION}" ;;
  esac
  printf '#!/bin/sh\\necho "%s"\\n' "$text" > "$out"
  chmod +x "$out"
  echo "go: building $pkg"
  exit 0
fi
exit 2
"""
    _write_exe(bindir / "go", script)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return calls


def _builds(calls: Path) -> list[str]:
    if not calls.exists():
        return []
    return [ln for ln in calls.read_text().splitlines() if ln.startswith("build ")]


# --------------------------------------------------------------------------- gen_replaces


def test_staging_version_mapping():
    assert gen.staging_version("v1.37.2") == "v0.37.2"
    assert gen.staging_version("v1.38.0-beta.0") == "v0.38.0-beta.0"
    with pytest.raises(ValueError):
        gen.staging_version("1.37.2")


def test_replaces_cover_exactly_the_v000_requirements():
    got = gen.replaces(KUBE_GOMOD, VERSION)
    assert got == [
        ("k8s.io/api", "v0.37.2"),
        ("k8s.io/apimachinery", "v0.37.2"),
        ("k8s.io/client-go", "v0.37.2"),
        ("k8s.io/kms", "v0.37.2"),
    ]


def test_render_is_a_wrapper_module():
    text = gen.render(KUBE_GOMOD, VERSION)
    assert "module gpulab.dev/controlplane/kubernetes" in text
    assert "require k8s.io/kubernetes v1.37.2" in text
    assert "godebug default=go1.26" in text
    assert re.search(r"^go 1\.26\.0$", text, re.M)
    for cmd in gen.COMMANDS:
        assert f"\t{cmd}\n" in text
    assert _replace_lines(text) == {
        m: f"{m} v0.37.2"
        for m in ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kms")
    }
    assert "./staging" not in text
    assert "DO NOT EDIT" in text.splitlines()[0]


def test_committed_wrapper_gomod_is_generated_and_pinned():
    text = (CONTROLPLANE / "kubernetes" / "go.mod").read_text()
    assert text.startswith("// Code generated by controlplane/gen_replaces.py")
    assert re.search(r"^\s*k8s\.io/kubernetes v1\.37\.2\b", text, re.M)
    reps = _replace_lines(text)
    assert len(reps) >= 25
    assert all(new == f"{old} v0.37.2" for old, new in reps.items())
    assert (CONTROLPLANE / "kubernetes" / "go.sum").is_file()
    etcd = (CONTROLPLANE / "etcd" / "go.mod").read_text()
    assert re.search(
        r"^\s*(require\s+)?go\.etcd\.io/etcd/server/v3 v3\.\d+\.\d+( // indirect)?$", etcd, re.M
    )
    assert (CONTROLPLANE / "etcd" / "go.sum").is_file()
    assert b.etcd_version_for(CONTROLPLANE) == ETCD


def _cached_kubernetes_gomod() -> Path | None:
    roots = [os.environ.get("GOMODCACHE"), os.environ.get("GOPATH")]
    roots = [Path(r) for r in roots if r] + [Path.home() / "go"]
    for root in roots:
        for base in (root, root / "pkg" / "mod"):
            p = base / "k8s.io" / f"kubernetes@{VERSION}" / "go.mod"
            if p.is_file():
                return p
    return None


def test_committed_replaces_match_real_kubernetes_gomod():
    path = _cached_kubernetes_gomod()
    if path is None:
        pytest.skip(f"k8s.io/kubernetes@{VERSION} not in the Go module cache")
    src = path.read_text()
    want = {m: f"{m} v0.37.2" for m in gen.staging_modules(src)}
    assert "k8s.io/api" in want and "k8s.io/client-go" in want
    assert "k8s.io/kube-openapi" not in want  # pseudo-version, a real module version
    assert _replace_lines((CONTROLPLANE / "kubernetes" / "go.mod").read_text()) == want
    assert _replace_lines(gen.render(src, VERSION)) == want


# --------------------------------------------------------------------------- flags


def test_ldflags_stamp_the_version():
    flags = b.ldflags(VERSION)
    assert flags.startswith("-s -w ")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.37.2" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=37" in flags
    assert "gitMinor=36" in b.ldflags("v1.36.3")


def test_go_build_command_and_env(tmp_path):
    cmd = b.go_build_command("kube-apiserver", tmp_path / "x", VERSION)
    assert cmd[:2] == ["go", "build"]
    assert cmd[cmd.index("-p") + 1] == "2"
    assert "-trimpath" in cmd
    assert "gitVersion=v1.37.2" in cmd[cmd.index("-ldflags") + 1]
    assert cmd[-1] == "k8s.io/kubernetes/cmd/kube-apiserver"
    etcd = b.go_build_command("etcd", tmp_path / "etcd", VERSION)
    assert etcd[-1] == "go.etcd.io/etcd/server/v3"
    env = b.build_env({"PATH": "/x", "GOFLAGS": "-buildvcs=false"})
    assert env["CGO_ENABLED"] == "0"
    assert env["GOWORK"] == "off"
    assert env["GOFLAGS"] == "-buildvcs=false -mod=readonly"


def test_cache_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path / "c"))
    assert b.default_cache_dir() == tmp_path / "c" / "bin"
    dirs = b.output_dirs(VERSION, etcd_version=ETCD)
    assert dirs["kube-apiserver"] == tmp_path / "c" / "bin" / "k8s-v1.37.2"
    assert dirs["etcd"] == tmp_path / "c" / "bin" / "etcd-v3.7.0"
    monkeypatch.delenv("GPU_LAB_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert b.default_cache_dir() == Path.home() / ".cache" / "gpu-lab" / "bin"
    assert REPO not in b.default_cache_dir().parents


# --------------------------------------------------------------------------- idempotence


def test_fake_cache_is_detected_and_not_rebuilt(tmp_path, no_go):
    paths = _fake_cache(tmp_path / "cache")
    msgs: list[str] = []
    got = b.build(cache_dir=tmp_path / "cache", progress=msgs.append, etcd_version=ETCD)
    assert got == paths  # no go on PATH, so anything but a cache hit would raise
    assert all("up to date" in m for m in msgs)
    assert b.find_binaries(VERSION, tmp_path / "cache", etcd_version=ETCD) == paths


def test_reported_version_parsing(tmp_path):
    paths = _fake_cache(tmp_path)
    assert b.reported_version("kube-apiserver", paths["kube-apiserver"]) == "v1.37.2"
    assert b.reported_version("etcd", paths["etcd"]) == "3.7.0"
    assert b.reported_version("etcd", tmp_path / "missing") is None


def test_wrong_version_is_not_accepted(tmp_path, no_go):
    paths = _fake_cache(tmp_path / "cache", version="v1.36.3")
    assert b.find_binaries(VERSION, tmp_path / "cache", etcd_version=ETCD) is None
    assert b.find_binaries("v1.36.3", tmp_path / "cache", etcd_version=ETCD) == paths
    with pytest.raises(b.GoNotFoundError):
        b.build(cache_dir=tmp_path / "cache", progress=lambda m: None, etcd_version=ETCD)


def test_binaries_on_path_are_used(tmp_path, no_go):
    for c in b.ALL:
        _fake_binary(no_go / c, c)
    msgs: list[str] = []
    got = b.build(cache_dir=tmp_path / "empty", progress=msgs.append, etcd_version=ETCD)
    assert got == {c: no_go / c for c in b.ALL}
    assert all("from PATH" in m for m in msgs)
    assert b.find_binaries(VERSION, tmp_path / "empty", etcd_version=ETCD, use_path=False) is None


def test_missing_go_is_a_clear_one_line_error(tmp_path, no_go):
    with pytest.raises(b.GoNotFoundError) as exc:
        b.build(["kube-apiserver"], cache_dir=tmp_path, progress=lambda m: None)
    msg = str(exc.value)
    assert msg.startswith("Go toolchain not found: install Go >= 1.")
    assert "kube-apiserver" in msg and "on PATH" in msg
    assert "\n" not in msg
    assert isinstance(exc.value, b.BuildError)


def test_main_reports_missing_go(tmp_path, no_go, capsys):
    rc = buildcli.main(["--components", "kube-scheduler", "--cache-dir", str(tmp_path), "--no-path"])
    assert rc == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Go toolchain not found")


def test_unknown_component():
    # kube-proxy is not built (the kind clusters run without it); a kind node's own are known
    with pytest.raises(b.BuildError, match=r"unknown component\(s\) kube-proxy; choose from .*kubelet, kubeadm, kubectl"):
        b.build(["kube-proxy"], progress=lambda m: None)


def test_build_with_fake_go_then_idempotent(tmp_path, fake_go):
    cache = tmp_path / "cache"
    msgs: list[str] = []
    got = b.build(cache_dir=cache, progress=msgs.append, etcd_version=ETCD, use_path=False)
    builds = _builds(fake_go)
    assert len(builds) == 4  # one component at a time
    assert all(" -p 2 " in f" {ln} " and "-trimpath" in ln for ln in builds)
    assert any("[4/4]" in m for m in msgs)
    for c, path in got.items():
        assert path == b.output_dirs(VERSION, cache, ETCD)[c] / c
        assert b.reported_version(c, path) == b.expected_version(c, VERSION, ETCD)
    stamp = json.loads((cache / "k8s-v1.37.2" / b.STAMP).read_text())
    assert set(stamp) == set(b.KUBE_COMPONENTS)
    assert stamp["kube-apiserver"]["version"] == VERSION
    assert json.loads((cache / "etcd-v3.7.0" / b.STAMP).read_text())["etcd"]["version"] == "3.7.0"

    # second run: nothing is rebuilt
    again = b.build(cache_dir=cache, progress=lambda m: None, etcd_version=ETCD, use_path=False)
    assert again == got
    assert len(_builds(fake_go)) == 4

    # --force rebuilds just what was asked for
    b.build(["kube-scheduler"], cache_dir=cache, progress=lambda m: None, force=True)
    assert len(_builds(fake_go)) == 5
    assert _builds(fake_go)[-1].endswith("k8s.io/kubernetes/cmd/kube-scheduler")


def test_stale_stamp_triggers_rebuild(tmp_path, fake_go):
    cache = tmp_path / "cache"
    b.build(["kube-apiserver"], cache_dir=cache, progress=lambda m: None, use_path=False)
    stamp_path = cache / "k8s-v1.37.2" / b.STAMP
    data = json.loads(stamp_path.read_text())
    data["kube-apiserver"]["gomod_sha256"] = "0" * 64  # the wrapper go.mod changed since
    stamp_path.write_text(json.dumps(data))
    b.build(["kube-apiserver"], cache_dir=cache, progress=lambda m: None, use_path=False)
    assert len(_builds(fake_go)) == 2


def test_failed_build_is_one_line_and_leaves_no_binary(tmp_path, monkeypatch):
    bindir = tmp_path / "badgo"
    _write_exe(
        bindir / "go",
        'if [ "$1" = env ]; then echo go1.26.8; exit 0; fi\n'
        'echo "k8s.io/x: missing go.sum entry"; exit 1',
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    with pytest.raises(b.BuildError) as exc:
        b.build(["kube-scheduler"], cache_dir=tmp_path / "c", progress=lambda m: None)
    msg = str(exc.value)
    assert "building kube-scheduler failed" in msg and "missing go.sum entry" in msg
    assert "\n" not in msg
    assert not (tmp_path / "c" / "k8s-v1.37.2" / "kube-scheduler").exists()


def test_module_entry_point_help():
    res = subprocess.run(
        [sys.executable, "-m", "gpu_lab.backends.local.buildcli", "--help"],
        capture_output=True,
        text=True,
        cwd=Path(b.__file__).parents[3],  # the checkout whose gpu_lab was imported
    )
    assert res.returncode == 0
    for flag in ("--components", "--cache-dir", "--force"):
        assert flag in res.stdout


@pytest.mark.parametrize("component, output, want", [
    ("kubelet", "Kubernetes v1.37.2\n", "v1.37.2"),
    ("kubeadm", "v1.37.2\n", "v1.37.2"),
    ("kubectl", "Client Version: v1.37.2\nKustomize Version: v5.8.1\n", "v1.37.2"),
])
def test_a_kind_nodes_binaries_report_their_version_their_own_way(component, output, want, tmp_path):
    """kubeadm and kubectl have no --version: each is asked as it answers."""
    fake = tmp_path / component
    args = " ".join(b.VERSION_ARGS.get(component, ["--version"]))
    fake.write_text(f'#!/bin/sh\n[ "$*" = "{args}" ] || exit 3\nprintf "{output}"\n')
    fake.chmod(0o755)
    assert b.reported_version(component, fake) == want
    assert b.output_dirs()[component].name == f"k8s-{b.DEFAULT_VERSION}"
