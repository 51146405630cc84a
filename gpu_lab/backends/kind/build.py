"""``gpu-lab kind build``: every image a kind GPU lab runs, built on this machine from pinned
sources (no image is pulled from any registry).

    gpu-lab kind build [--force]

In order, each step skipped when its output is already there and made from the same inputs:

1. Go binaries into the cache (``~/.cache/gpu-lab/bin``): the control plane (as for the local
   backend) and a node's ``kubelet``, ``kubeadm`` and ``kubectl`` from the same wrapper module
   (``controlplane/kubernetes``, ``k8s.io/kubernetes`` v1.37.2); ``containerd``, ``ctr`` and
   ``containerd-shim-runc-v2`` (the version kind v0.33.0's base image pins), ``crictl`` and
   the ``kind`` CLI, each ``go install module@version``.
2. ``pause`` compiled with gcc from ``build/pause/linux/pause.c`` of the pinned Kubernetes
   module, as Kubernetes' own Makefile does (``-Os -static``).
3. A Debian root filesystem (``debootstrap``, Debian's packages only: systemd, runc, the CNI
   plugins, iptables, python3, ...), imported as ``gpu-lab/kind-rootfs``.
4. The images kubeadm expects, each a static binary on ``scratch`` under the name kubeadm asks
   for (``kubeadm config images list``): kube-apiserver, kube-controller-manager,
   kube-scheduler, etcd, pause. The clusters run without kube-proxy, and kubeadm's CoreDNS is
   scaled to 0 once the cluster exists (without kube-proxy it cannot reach the API server's
   Service; no GPU lesson needs cluster DNS), so neither image is built.
5. ``gpu-lab/kind-base``: the rootfs plus kind's own node files (systemd units, entrypoint,
   containerd config) read from the pinned kind module, the binaries above, and three changes
   to containerd's config: the pause image kubeadm uses, a CNI config template (containerd
   writes each node's ptp + host-local config from the pod CIDR the kubelet reports, which is
   what kind's kindnetd daemon does for pods on one node; pods on different nodes do not reach
   each other, and no lesson needs them to), and ``restrict_oom_score_adj`` (a pod's
   oom_score_adj never below containerd's own: no change where containerd runs at -999, and
   what lets pods start where CAP_SYS_RESOURCE is missing).
6. ``gpu-lab/kind-node:v1.37.2``: the base with those images imported into containerd (in a
   privileged build container, as ``kind build node-image`` does) and ``/kind/version``.
7. ``gpu-lab/fake-device-plugin:<version>``: the rootfs plus gpu-lab and its dependencies
   (not numpy or pandas), running ``gpu-lab device-plugin``; it also serves as a workload image
   (``python3``).

Needs root for debootstrap and a running Docker engine (``gpu-lab kind engine`` says what is
missing). Progress goes to ``progress``; long steps print a heartbeat.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ...errors import BuildError, KindError
from ...names import VERSION
from ..local import build as cpbuild
from .config import KIND_RELEASE
from .manifests import IMAGE as PLUGIN_IMAGE

Progress = Callable[[str], object]

KUBERNETES_VERSION = cpbuild.DEFAULT_VERSION
#: kind v0.33.0's images/base/Dockerfile pins containerd v2.3.4
CONTAINERD_VERSION = "v2.3.4"
CRICTL_VERSION = "v1.37.0"
#: ``kubeadm config images list --kubernetes-version v1.37.2``
PAUSE_VERSION = "3.10.2"
ETCD_IMAGE_TAG = "3.7.0-0"
DEBIAN_SUITE = "bookworm"
#: Debian packages of the node's root filesystem (kind's base image installs the same kinds of
#: tools; runc and the CNI plugins come from Debian here instead of from source)
ROOTFS_PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "iptables", "nftables", "conntrack", "iproute2", "ethtool",
    "util-linux", "mount", "kmod", "libseccomp2", "pigz", "ca-certificates", "procps", "runc",
    "containernetworking-plugins", "jq", "socat", "e2fsprogs", "python3",
)

IMAGE_REGISTRY = "registry.k8s.io"  # the names kubeadm's static pods and addons ask for
ROOTFS_IMAGE = f"gpu-lab/kind-rootfs:{DEBIAN_SUITE}"
BASE_IMAGE = f"gpu-lab/kind-base:{KIND_RELEASE}"
NODE_IMAGE = f"gpu-lab/kind-node:{KUBERNETES_VERSION}"
INPUTS_LABEL = "dev.gpulab.inputs"


@dataclass(frozen=True)
class GoTool:
    """Binaries ``go install``ed from one module at one version."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]  # relative to the module ("." for its root)
    tags: str = ""
    ldflags: str = "-s -w"

    def binaries(self) -> list[str]:
        return [self.module.rsplit("/", 1)[-1] if p == "." else p.rsplit("/", 1)[-1]
                for p in self.packages]


GO_TOOLS = (
    GoTool("kind", "sigs.k8s.io/kind", KIND_RELEASE, (".",)),
    GoTool("containerd", "github.com/containerd/containerd/v2", CONTAINERD_VERSION,
           ("cmd/containerd", "cmd/ctr", "cmd/containerd-shim-runc-v2"),
           tags="no_btrfs no_devmapper no_zfs no_aufs",
           ldflags=f"-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"),
    GoTool("crictl", "sigs.k8s.io/cri-tools", CRICTL_VERSION, ("cmd/crictl",),
           ldflags=f"-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version={CRICTL_VERSION}"),
)


def cache_root() -> Path:
    return cpbuild.default_cache_dir().parent


def tool_dir(tool: GoTool) -> Path:
    return cpbuild.default_cache_dir() / f"{tool.name}-{tool.version}"


def tool_path(name: str) -> Path | None:
    """A built Go tool's binary (``kind``, ``ctr``, ...) or a node binary (``kubectl``)."""
    for t in GO_TOOLS:
        if name in t.binaries():
            p = tool_dir(t) / name
            return p if p.is_file() else None
    if name in cpbuild.NODE_COMPONENTS:
        p = cpbuild.output_dirs()[name] / name
        return p if p.is_file() else None
    return None


def work_dir() -> Path:
    return cache_root() / "kind-build"


# ----------------------------------------------------------------------------- running


def _run(argv: list[str], what: str, progress: Progress, *, input_path: Path | None = None,
         env: dict[str, str] | None = None, cwd: Path | None = None, heartbeat_s: float = 30.0,
         timeout: float | None = 3600) -> str:
    """Run one command; on failure raise a one-line KindError with its last output line."""
    log = work_dir() / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "a") as out, open(input_path, "rb") if input_path else open(os.devnull, "rb") as inp:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(argv, stdin=inp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, cwd=cwd, text=True, errors="replace")
        except FileNotFoundError:
            raise KindError(f"{what}: {argv[0]} not found on PATH") from None
        lines: list[str] = []
        assert proc.stdout is not None
        last_beat = started
        for line in proc.stdout:
            out.write(line)
            lines.append(line)
            now = time.monotonic()
            if now - last_beat >= heartbeat_s:
                progress(f"  ... {what}: {now - started:.0f} s")
                last_beat = now
            if timeout is not None and now - started > timeout:
                proc.kill()
        rc = proc.wait()
    if rc != 0:
        tail = next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
        raise KindError(f"{what} failed (exit {rc}): {tail[:300]} (full log: {log})")
    return "".join(lines)


def docker_image_inputs(image: str) -> str | None:
    """The inputs label of a local image, "" when it has none, None when it is absent."""
    res = subprocess.run(["docker", "image", "inspect", "--format",
                          "{{ index .Config.Labels \"" + INPUTS_LABEL + "\" }}", image],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None
    return res.stdout.strip().replace("<no value>", "")


def image_exists(image: str) -> bool:
    return docker_image_inputs(image) is not None


def _digest(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            if p.is_dir():
                for f in sorted(q for q in p.rglob("*")
                                if q.is_file() and "__pycache__" not in q.parts):
                    h.update(str(f.relative_to(p)).encode())
                    h.update(f.read_bytes())
            elif p.is_file():
                h.update(p.read_bytes())
        else:
            h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def file_digest(path: Path) -> str:
    """Cheap identity of a (large) binary: size and mtime, not its bytes."""
    st = path.stat()
    return f"{path.name}:{st.st_size}:{int(st.st_mtime)}"


def docker_build(image: str, context: Path, dockerfile: str, inputs: str, what: str,
                 progress: Progress) -> None:
    (context / "Dockerfile").write_text(dockerfile + f'\nLABEL {INPUTS_LABEL}="{inputs}"\n')
    _run(["docker", "build", "-q", "-t", image, str(context)], what, progress,
         env={**os.environ, "DOCKER_BUILDKIT": "0"})


# ----------------------------------------------------------------------------- step 1: Go


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"
    env.pop("GOFLAGS", None)
    return env


def build_go_tools(progress: Progress, force: bool = False) -> dict[str, Path]:
    """``go install module/pkg@version`` for each of GO_TOOLS into its cache folder."""
    out: dict[str, Path] = {}
    for tool in GO_TOOLS:
        dest = tool_dir(tool)
        want = [dest / b for b in tool.binaries()]
        if not force and all(p.is_file() for p in want):
            progress(f"{tool.name} {tool.version}: up to date ({dest})")
        else:
            if shutil.which("go") is None:
                raise KindError(f"building {tool.name} needs Go (https://go.dev/dl/)")
            dest.mkdir(parents=True, exist_ok=True)
            for pkg in tool.packages:
                path = tool.module if pkg == "." else f"{tool.module}/{pkg}"
                progress(f"building {path}@{tool.version}")
                argv = ["go", "install", "-p", str(cpbuild.JOBS), "-trimpath", "-ldflags", tool.ldflags]
                if tool.tags:
                    argv += ["-tags", tool.tags]
                t0 = time.monotonic()
                _run([*argv, f"{path}@{tool.version}"], f"go install {path}@{tool.version}",
                     progress, env={**go_env(), "GOBIN": str(dest)})
                progress(f"built {path}@{tool.version} in {time.monotonic() - t0:.0f} s")
        out.update({p.name: p for p in want})
    return out


def module_dir(module: str, version: str) -> Path:
    """A pinned Go module's source in the module cache (downloaded if missing)."""
    res = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                         capture_output=True, text=True, env=go_env(), cwd=tempfile.gettempdir())
    try:
        return Path(json.loads(res.stdout)["Dir"])
    except (ValueError, KeyError):
        raise KindError(f"go mod download {module}@{version} failed: "
                        f"{(res.stderr.strip().splitlines() or ['no output'])[-1]}") from None


def kubernetes_module_dir() -> Path:
    """``k8s.io/kubernetes`` at the pinned version (``build/pause`` comes from it)."""
    return module_dir("k8s.io/kubernetes", KUBERNETES_VERSION)


def kind_module_dir() -> Path:
    """``sigs.k8s.io/kind`` at the pinned version (its node files, ``images/base/files``)."""
    return module_dir("sigs.k8s.io/kind", KIND_RELEASE)


def build_pause(progress: Progress, force: bool = False) -> Path:
    dest = cpbuild.default_cache_dir() / f"pause-{PAUSE_VERSION}" / "pause"
    if dest.is_file() and not force:
        progress(f"pause {PAUSE_VERSION}: up to date ({dest})")
        return dest
    src = kubernetes_module_dir() / "build" / "pause" / "linux" / "pause.c"
    if shutil.which("gcc") is None:
        raise KindError("building pause needs gcc (apt-get install gcc libc6-dev)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress(f"compiling pause {PAUSE_VERSION} from {src.name}")
    _run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_VERSION}",
          "-o", str(dest), str(src)], "gcc pause.c", progress)
    _run(["strip", str(dest)], "strip pause", progress)
    return dest


# ----------------------------------------------------------------------------- step 3: rootfs


def debian_mirror() -> str:
    """The Debian archive apt uses on this machine (deb822 or one-line sources)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1]
    raise KindError("no Debian archive in /etc/apt/sources.list*: debootstrap needs one")


def build_rootfs(progress: Progress, force: bool = False) -> None:
    inputs = _digest(DEBIAN_SUITE, ROOTFS_PACKAGES)
    if not force and docker_image_inputs(ROOTFS_IMAGE) == inputs:
        progress(f"{ROOTFS_IMAGE}: up to date")
        return
    if shutil.which("debootstrap") is None:
        raise KindError("building the node's root filesystem needs debootstrap "
                        "(apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise KindError("debootstrap needs root: run `gpu-lab kind build` as root")
    root = work_dir() / "rootfs"
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    progress(f"debootstrap {DEBIAN_SUITE} ({len(ROOTFS_PACKAGES)} packages and their dependencies)")
    _run(["debootstrap", "--variant=minbase", "--include=" + ",".join(ROOTFS_PACKAGES),
          DEBIAN_SUITE, str(root), debian_mirror()], "debootstrap", progress)
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for f in (root / junk).glob("*"):
            if f.is_file():
                f.unlink()
    tar = work_dir() / "rootfs.tar"
    progress(f"importing the root filesystem as {ROOTFS_IMAGE}")
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    _run(["docker", "import", "--change", f'LABEL {INPUTS_LABEL}="{inputs}"', str(tar),
          ROOTFS_IMAGE], "docker import", progress)
    tar.unlink()
    shutil.rmtree(root)


# ----------------------------------------------------------------------------- step 4: images


def component_images(binaries: dict[str, Path], pause: Path) -> dict[str, tuple[Path, str]]:
    """kubeadm's image name -> (binary, path inside the image)."""
    v = KUBERNETES_VERSION
    r = IMAGE_REGISTRY
    return {
        f"{r}/kube-apiserver:{v}": (binaries["kube-apiserver"], "/usr/local/bin/kube-apiserver"),
        f"{r}/kube-controller-manager:{v}": (binaries["kube-controller-manager"],
                                             "/usr/local/bin/kube-controller-manager"),
        f"{r}/kube-scheduler:{v}": (binaries["kube-scheduler"], "/usr/local/bin/kube-scheduler"),
        f"{r}/etcd:{ETCD_IMAGE_TAG}": (binaries["etcd"], "/usr/local/bin/etcd"),
        f"{r}/pause:{PAUSE_VERSION}": (pause, "/pause"),
    }


def build_component_images(images: dict[str, tuple[Path, str]], progress: Progress,
                           force: bool = False) -> None:
    for image, (binary, target) in images.items():
        inputs = _digest(file_digest(binary), target)
        if not force and docker_image_inputs(image) == inputs:
            continue
        progress(f"image {image} (static binary on scratch)")
        with tempfile.TemporaryDirectory(dir=work_dir()) as d:
            shutil.copy2(binary, Path(d) / binary.name)
            user = "\nUSER 65535:65535" if target == "/pause" else ""
            dockerfile = (f"FROM scratch\nCOPY {binary.name} {target}\n"
                          "ENV PATH=/usr/local/bin:/usr/bin:/bin" + user +
                          f'\nENTRYPOINT ["{target}"]')
            docker_build(image, Path(d), dockerfile, inputs, f"docker build {image}", progress)
    progress(f"{len(images)} control-plane images ready")


# ----------------------------------------------------------------------------- step 5: base


CNI_TEMPLATE = """{
  "cniVersion": "1.0.0",
  "name": "gpu-lab",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{"dst": "0.0.0.0/0"}],
        "ranges": [{{range $i, $range := .PodCIDRRanges}}{{if $i}}, {{end}}[{"subnet": "{{$range}}"}]{{end}}]
      },
      "mtu": 1500
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"""

CONTAINERD_EXTRA = """
[plugins."io.containerd.grpc.v1.cri".cni]
  # Debian's CNI plugins; containerd writes the node's config from this template once the
  # kubelet reports the node's pod CIDR (gpu-lab's clusters run no CNI daemon)
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/cni/net.d"
  conf_template = "/etc/containerd/cni-template.json"
"""


def containerd_config(kind_text: str) -> str:
    """kind's containerd config with gpu-lab's three changes (module docstring, step 5)."""
    out = []
    changed = {"sandbox": False, "oom": False}
    for line in kind_text.splitlines():
        s = line.strip()
        if s.startswith("sandbox_image"):
            line = line[: len(line) - len(line.lstrip())] + f'sandbox_image = "{IMAGE_REGISTRY}/pause:{PAUSE_VERSION}"'
            changed["sandbox"] = True
        elif s.startswith("restrict_oom_score_adj"):
            line = line[: len(line) - len(line.lstrip())] + "restrict_oom_score_adj = true"
            changed["oom"] = True
        out.append(line)
    missing = [k for k, v in changed.items() if not v]
    if missing:
        raise KindError(f"kind {KIND_RELEASE}'s containerd config has no {', '.join(missing)} "
                        "setting to change: the pinned kind module is not what gpu-lab expects")
    return "\n".join(out) + "\n" + CONTAINERD_EXTRA


BASE_DOCKERFILE = f"""FROM {ROOTFS_IMAGE}
COPY files/ /
COPY bin/containerd bin/ctr bin/containerd-shim-runc-v2 bin/crictl /usr/local/bin/
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
# as kind's base image: only the units a node needs start, systemd is PID 1
RUN chmod 0755 /usr/local/bin/* /kind/bin/* /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl \\
 && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service \\
 && mkdir -p /etc/kubernetes/manifests /etc/cni/net.d /opt/cni \\
 && ln -sfn /usr/lib/cni /opt/cni/bin
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]"""


def cri_base_spec(ctr: Path) -> str:
    """``ctr oci spec`` with kind's two changes: its product-files hook, no rlimits."""
    res = subprocess.run([str(ctr), "oci", "spec"], capture_output=True, text=True)
    if res.returncode != 0:
        raise KindError(f"ctr oci spec failed: {res.stderr.strip()[:200]}")
    spec = json.loads(res.stdout)
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append(
        {"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    return json.dumps(spec, indent=2) + "\n"


def build_base(bins: dict[str, Path], progress: Progress, force: bool = False) -> None:
    files = kind_module_dir() / "images" / "base" / "files"
    names = ("containerd", "ctr", "containerd-shim-runc-v2", "crictl", *cpbuild.NODE_COMPONENTS)
    inputs = _digest(files, BASE_DOCKERFILE, CNI_TEMPLATE, CONTAINERD_EXTRA,
                     [file_digest(bins[n]) for n in names], docker_image_inputs(ROOTFS_IMAGE))
    if not force and docker_image_inputs(BASE_IMAGE) == inputs:
        progress(f"{BASE_IMAGE}: up to date")
        return
    progress(f"image {BASE_IMAGE} (kind {KIND_RELEASE}'s node files, containerd "
             f"{CONTAINERD_VERSION}, kubelet {KUBERNETES_VERSION})")
    with tempfile.TemporaryDirectory(dir=work_dir()) as d:
        ctx = Path(d)
        shutil.copytree(files, ctx / "files", ignore=shutil.ignore_patterns("LICENSES"))
        for p in (ctx / "files").rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        cfg = ctx / "files" / "etc" / "containerd"
        (cfg / "config.toml").write_text(containerd_config((cfg / "config.toml").read_text()))
        (cfg / "cni-template.json").write_text(CNI_TEMPLATE)
        (cfg / "cri-base.json").write_text(cri_base_spec(bins["ctr"]))
        (ctx / "bin").mkdir()
        for n in names:
            shutil.copy2(bins[n], ctx / "bin" / n)
        docker_build(BASE_IMAGE, ctx, BASE_DOCKERFILE, inputs, f"docker build {BASE_IMAGE}",
                     progress)


# ----------------------------------------------------------------------------- step 6: node


DEFAULT_STORAGE = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""


def build_node(images: Iterable[str], progress: Progress, force: bool = False) -> None:
    images = list(images)
    inputs = _digest(docker_image_inputs(BASE_IMAGE), [(i, docker_image_inputs(i)) for i in images],
                     DEFAULT_STORAGE, KUBERNETES_VERSION)
    if not force and docker_image_inputs(NODE_IMAGE) == inputs:
        progress(f"{NODE_IMAGE}: up to date")
        return
    progress(f"image {NODE_IMAGE} (imports {len(images)} images into the node's containerd)")
    name = f"gpu-lab-node-build-{os.getpid()}"
    tar = work_dir() / "images.tar"
    _run(["docker", "save", "-o", str(tar), *images], "docker save", progress)
    try:
        _run(["docker", "run", "-d", "--name", name, "--privileged", "--entrypoint=sleep",
              BASE_IMAGE, "infinity"], "start the build container", progress)
        _run(["docker", "exec", "-d", name, "sh", "-c", "containerd >/var/log/build-containerd.log 2>&1"],
             "start containerd in the build container", progress)
        deadline = time.monotonic() + 60
        while subprocess.run(["docker", "exec", name, "ctr", "version"], capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise KindError("containerd did not start in the build container")
            time.sleep(0.5)
        _run(["docker", "exec", "-i", name, "ctr", "--namespace=k8s.io", "images", "import",
              "--all-platforms", "--no-unpack", "--digests", "-"], "ctr images import", progress,
             input_path=tar)
        script = (
            'ctr -n k8s.io images ls -q | grep "^import-" | xargs -r ctr -n k8s.io images rm >/dev/null; '
            "pkill containerd; while pidof containerd >/dev/null; do sleep 0.2; done; "
            f"rm -f /var/log/build-containerd.log; echo {KUBERNETES_VERSION} > /kind/version; "
            "mkdir -p /kind/manifests; cat > /kind/manifests/default-storage.yaml"
        )
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=work_dir(), delete=False) as f:
            f.write(DEFAULT_STORAGE)
        try:
            _run(["docker", "exec", "-i", name, "sh", "-c", script], "finish the node image",
                 progress, input_path=Path(f.name))
        finally:
            os.unlink(f.name)
        _run(["docker", "commit", "--change", 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]',
              "--change", f'LABEL {INPUTS_LABEL}="{inputs}"', name, NODE_IMAGE],
             "docker commit", progress)
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)
        tar.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- step 7: plugin


def plugin_requirements(pyproject: Path) -> list[str]:
    """gpu-lab's dependencies without numpy and pandas (the plugin never loads them)."""
    import importlib
    import re

    try:  # tomllib is 3.11's; the package supports 3.10 elsewhere
        tomllib = importlib.import_module("tomllib")
    except ModuleNotFoundError:
        raise KindError("gpu-lab kind build needs Python 3.11 or newer (tomllib)") from None
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [d for d in deps if re.split(r"[<>=!~; \[]", d)[0].lower() not in ("numpy", "pandas")]


PLUGIN_DOCKERFILE = f"""FROM {ROOTFS_IMAGE}
COPY site /opt/gpu-lab/site
COPY gpu-lab /usr/local/bin/gpu-lab
ENV PYTHONPATH=/opt/gpu-lab/site PYTHONUNBUFFERED=1
# the gRPC stubs are generated once here instead of at every start
RUN chmod 0755 /usr/local/bin/gpu-lab && python3 -m gpu_lab.deviceplugin.stubs \\
 && gpu-lab device-plugin --help > /dev/null
ENTRYPOINT ["gpu-lab", "device-plugin"]"""

LAUNCHER = "#!/usr/bin/python3\nimport sys\nfrom gpu_lab.cli import main\nsys.exit(main())\n"


def build_plugin_image(repo: Path, progress: Progress, force: bool = False) -> None:
    pyproject = repo / "pyproject.toml"
    if not pyproject.is_file():
        raise KindError(f"no pyproject.toml in {repo}: the device-plugin image is built from a "
                        "gpu-lab source tree (a git clone)")
    reqs = plugin_requirements(pyproject)
    inputs = _digest(repo / "gpu_lab", pyproject, reqs, PLUGIN_DOCKERFILE,
                     docker_image_inputs(ROOTFS_IMAGE))
    if not force and docker_image_inputs(PLUGIN_IMAGE) == inputs:
        progress(f"{PLUGIN_IMAGE}: up to date")
        return
    progress(f"image {PLUGIN_IMAGE} (gpu-lab {VERSION} and {len(reqs)} dependencies)")
    with tempfile.TemporaryDirectory(dir=work_dir()) as d:
        ctx = Path(d)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
               "--disable-pip-version-check", "--target", str(ctx / "site")]
        _run([*pip, *reqs], "pip install (plugin dependencies)", progress)
        _run([*pip, "--no-deps", str(repo)], "pip install gpu-lab", progress)
        shutil.rmtree(ctx / "site" / "bin", ignore_errors=True)
        (ctx / "gpu-lab").write_text(LAUNCHER)
        docker_build(PLUGIN_IMAGE, ctx, PLUGIN_DOCKERFILE, inputs, f"docker build {PLUGIN_IMAGE}",
                     progress)


# ----------------------------------------------------------------------------- all


def require_docker() -> None:
    if shutil.which("docker") is None:
        raise KindError("docker not found on PATH: the kind backend needs a Docker engine "
                        "(Debian: apt-get install docker.io)")
    res = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no answer"])[-1]
        raise KindError(f"no Docker engine: {last} (start dockerd, see `gpu-lab kind engine`)")


def images_ready() -> list[str]:
    """The images ``gpu-lab up --backend kind`` needs that are not built yet."""
    return [i for i in (NODE_IMAGE, PLUGIN_IMAGE) if not image_exists(i)]


def build(repo: Path, progress: Progress = print, force: bool = False, go: bool = True) -> None:
    """All seven steps (module docstring); raises KindError with one line on failure. Each
    step's time is printed as it ends and all of them in the last line, so a cold build's log
    says where its minutes went. ``go=False``: only the steps that need no Go binary (pause,
    the root filesystem, the plugin image: mostly downloads), which a fresh machine can run
    while the control plane compiles; a later full build finds them up to date."""
    started = time.monotonic()
    require_docker()
    work_dir().mkdir(parents=True, exist_ok=True)
    took: list[tuple[str, float]] = []

    def step(n: int, title: str, short: str, run):
        progress(f"[{n}/7] {title}")
        t0 = time.monotonic()
        value = run()
        took.append((short, time.monotonic() - t0))
        if took[-1][1] >= 5:
            progress(f"[{n}/7] {short}: {took[-1][1]:.0f} s")
        return value

    def go_binaries() -> dict[str, Path]:
        try:
            k8s = cpbuild.build((*cpbuild.ALL, *cpbuild.NODE_COMPONENTS), progress=progress, force=force)
        except BuildError as err:
            raise KindError(str(err)) from None
        return {**{k: Path(v) for k, v in k8s.items()}, **build_go_tools(progress, force)}

    if go:
        bins = step(1, "Go binaries: control plane, kubelet/kubeadm/kubectl, containerd, crictl, kind",
                    "Go binaries", go_binaries)
    pause = step(2, "pause", "pause", lambda: build_pause(progress, force))
    step(3, f"root filesystem (Debian {DEBIAN_SUITE})", "root filesystem",
         lambda: build_rootfs(progress, force))
    if go:
        images = component_images(bins, pause)
        step(4, "control-plane and addon images", "component images",
             lambda: build_component_images(images, progress, force))
        step(5, "node base image", "base image", lambda: build_base(bins, progress, force))
        step(6, "node image", "node image", lambda: build_node(images, progress, force))
    step(7, "fake device plugin image", "plugin image",
         lambda: build_plugin_image(repo, progress, force))
    steps = ", ".join(f"{name} {secs:.0f} s" for name, secs in took)
    if not go:
        progress(f"the steps without Go done in {time.monotonic() - started:.0f} s ({steps})")
        return
    progress(f"done in {time.monotonic() - started:.0f} s ({steps}): {NODE_IMAGE}, {PLUGIN_IMAGE}")
