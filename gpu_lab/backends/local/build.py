"""Build the real control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager) from pinned Go module sources.

Nothing is downloaded but Go modules: the wrapper modules in ``controlplane/``
pin ``k8s.io/kubernetes`` and ``go.etcd.io/etcd/server/v3`` (with a ``go.sum``),
and ``go build`` compiles them.  Binaries land in a per-user cache *outside* the
repository, keyed by version::

    ~/.cache/gpu-lab/bin/k8s-v1.37.2/{kube-apiserver,kube-scheduler,kube-controller-manager}
    ~/.cache/gpu-lab/bin/etcd-v3.7.0/etcd

(``$GPU_LAB_CACHE`` replaces ``~/.cache/gpu-lab``.)  Building is idempotent: a
binary that exists and whose ``--version`` reports the wanted version is kept,
and matching binaries already on ``PATH`` are used instead of building.

    python3 -m gpu_lab.backends.local.buildcli [--components kube-apiserver,etcd] [--force]
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ...errors import BuildError, GoNotFoundError

DEFAULT_VERSION = "v1.37.2"
KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ALL = ("etcd", *KUBE_COMPONENTS)
#: what a kind node image runs besides the control plane (built only on request, by
#: ``gpu-lab kind build``; same wrapper module, same flags)
NODE_COMPONENTS = ("kubelet", "kubeadm", "kubectl")
#: built only on request (``--with``), by their own module (:mod:`.kueuebuild`)
ADDONS = ("kueue",)
PACKAGES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kubeadm": "k8s.io/kubernetes/cmd/kubeadm",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
}
#: how each binary tells its version (kubeadm and kubectl have no ``--version``)
VERSION_ARGS = {"kubeadm": ["version", "-o", "short"], "kubectl": ["version", "--client"]}
#: go.mod pins used when the wrapper modules cannot be read (kept in sync with controlplane/)
FALLBACK_ETCD_VERSION = "v3.7.0"
FALLBACK_GO_VERSION = "1.26"
#: ``go build -p``: how many packages compile at once (the link of kube-apiserver alone
#: takes a few GB; two compile jobs keep a 2-core / 8 GB machine usable)
JOBS = 2
VERSION_TIMEOUT_S = 20
STAMP = ".gpu-lab-build.json"

Progress = Callable[[str], object]


# --------------------------------------------------------------------------- paths


def repo_controlplane_dir() -> Path:
    """``controlplane/`` with the wrapper modules (``$GPU_LAB_CONTROLPLANE_DIR`` overrides)."""
    env = os.environ.get("GPU_LAB_CONTROLPLANE_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "controlplane"


def default_cache_dir() -> Path:
    """Root of the binary cache: ``$GPU_LAB_CACHE/bin`` or ``~/.cache/gpu-lab/bin``."""
    env = os.environ.get("GPU_LAB_CACHE")
    if env:
        return Path(env).expanduser() / "bin"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gpu-lab" / "bin"


def _gomod_field(text: str, directive: str, module: str | None = None) -> str | None:
    """Version of ``require module`` (block or single line) or the value of ``go``."""
    if directive == "go":
        m = re.search(r"^go\s+(\S+)", text, re.M)
        return m.group(1) if m else None
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module or '')}\s+(v\S+)", text, re.M)
    return m.group(1) if m else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def etcd_version_for(controlplane: Path | None = None) -> str:
    """The etcd release the wrapper module pins (kubeadm's default for this Kubernetes)."""
    text = _read((controlplane or repo_controlplane_dir()) / "etcd" / "go.mod")
    return (text and _gomod_field(text, "require", PACKAGES["etcd"])) or FALLBACK_ETCD_VERSION


def _minor(version: str) -> str:
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.\d+)?", version)
    if not m:
        raise BuildError(f"not a release version: {version!r} (expected v1.X.Y)")
    return m.group(2)


def output_dirs(
    version: str = DEFAULT_VERSION, cache_dir: Path | None = None, etcd_version: str | None = None
) -> dict[str, Path]:
    """Where each component's binary lives in the cache."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    ev = etcd_version or etcd_version_for()
    out = {c: root / f"k8s-{version}" for c in (*KUBE_COMPONENTS, *NODE_COMPONENTS)}
    out["etcd"] = root / f"etcd-{ev}"
    return out


# --------------------------------------------------------------------------- flags


def ldflags(version: str = DEFAULT_VERSION) -> str:
    """``-ldflags`` that strip the binary and stamp the Kubernetes version, so that
    ``kube-apiserver --version`` prints ``Kubernetes v1.37.2``."""
    major = version.lstrip("v").split(".", 1)[0]
    minor = _minor(version)
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def go_build_command(
    component: str, output: Path, version: str = DEFAULT_VERSION, jobs: int = JOBS
) -> list[str]:
    cmd = ["go", "build", "-p", str(jobs), "-trimpath"]
    cmd += ["-ldflags", ldflags(version) if component != "etcd" else "-s -w"]
    return [*cmd, "-o", str(output), PACKAGES[component]]


def build_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"  # never let a go.work above the wrapper module change the build
    env.setdefault("GOFLAGS", "")
    if "-mod=" not in env["GOFLAGS"]:
        env["GOFLAGS"] = (env["GOFLAGS"] + " -mod=readonly").strip()
    return env


# --------------------------------------------------------------------------- version checks


def expected_version(component: str, version: str, etcd_version: str | None = None) -> str:
    """What ``component --version`` must report."""
    if component == "etcd":
        return (etcd_version or etcd_version_for()).lstrip("v")
    return version


def reported_version(component: str, binary: Path | str) -> str | None:
    """Run ``binary --version`` and parse it (``Kubernetes v1.37.2`` / ``etcd Version: 3.7.0``;
    kubeadm prints ``v1.37.2``, kubectl ``Client Version: v1.37.2``)."""
    try:
        res = subprocess.run(
            [str(binary), *VERSION_ARGS.get(component, ["--version"])],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = res.stdout + res.stderr
    pattern = {"etcd": r"etcd Version:\s*(\S+)", "kubeadm": r"^(v\S+)",
               "kubectl": r"Client Version:\s*(v\S+)"}.get(component, r"Kubernetes\s+(v\S+)")
    m = re.search(pattern, out, re.MULTILINE)
    return m.group(1) if m else None


def _is_good(component: str, binary: Path, want: str) -> bool:
    return (
        binary.is_file()
        and os.access(binary, os.X_OK)
        and reported_version(component, binary) == want
    )


def _stamp_ok(out_dir: Path, component: str, gomod_hash: str | None) -> bool:
    """A stamp left by a previous build must name the same go.mod; no stamp is fine."""
    text = _read(out_dir / STAMP)
    if text is None or gomod_hash is None:
        return True
    try:
        entry = json.loads(text).get(component)
    except (ValueError, AttributeError):
        return True
    return entry is None or entry.get("gomod_sha256") == gomod_hash


def _write_stamp(out_dir: Path, component: str, entry: dict) -> None:
    path = out_dir / STAMP
    try:
        data = json.loads(_read(path) or "{}")
        if not isinstance(data, dict):
            data = {}
    except ValueError:
        data = {}
    data[component] = entry
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def find_binaries(
    version: str = DEFAULT_VERSION,
    cache_dir: Path | None = None,
    *,
    components: Iterable[str] = ALL,
    etcd_version: str | None = None,
    use_path: bool = True,
) -> dict[str, Path] | None:
    """Paths of already-built binaries reporting the right version (cache first, then
    ``PATH``), or ``None`` when any requested component is missing."""
    ev = etcd_version or etcd_version_for()
    dirs = output_dirs(version, cache_dir, ev)
    found: dict[str, Path] = {}
    for c in components:
        path = _find_one(c, dirs[c], expected_version(c, version, ev), use_path)
        if path is None:
            return None
        found[c] = path
    return found


def _find_one(component: str, out_dir: Path, want: str, use_path: bool) -> Path | None:
    cached = out_dir / component
    if _is_good(component, cached, want):
        return cached
    if use_path:
        on_path = shutil.which(component)
        if (
            on_path
            and Path(on_path).resolve() != cached.resolve()
            and _is_good(component, Path(on_path), want)
        ):
            return Path(on_path)
    return None


# --------------------------------------------------------------------------- building


def _fmt_elapsed(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def go_version(go: str = "go") -> str | None:
    """``go1.26.8`` -> ``1.26.8``; ``None`` when go is missing."""
    exe = shutil.which(go)
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "env", "GOVERSION"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.removeprefix("go") or None


def require_go(missing: dict[str, str], min_go: str) -> str:
    """The go version, or a one-line :class:`GoNotFoundError` naming what to install.

    ``missing`` maps each component still to build to the version it must report."""
    gv = go_version()
    if gv is None:
        names = ", ".join(f"{c} ({v})" for c, v in missing.items())
        raise GoNotFoundError(
            f"Go toolchain not found: install Go >= {min_go} or put {names} on PATH"
        )
    return gv


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Serialize builds into one cache (POSIX; a no-op elsewhere)."""
    root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _wait(proc: subprocess.Popen, name: str, started: float, progress: Progress, every: float):
    """Wait for ``proc`` printing a heartbeat; return (returncode, peak RSS in MiB or None)."""
    next_tick = started + every
    while True:
        if hasattr(os, "wait4"):
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                # ru_maxrss is KiB on Linux: the largest of go and the compile/link
                # processes it waited for
                return proc.returncode, usage.ru_maxrss / 1024
        elif proc.poll() is not None:  # pragma: no cover - Windows
            return proc.returncode, None
        now = time.monotonic()
        if now >= next_tick:
            progress(f"  ... {name}: {_fmt_elapsed(now - started)} elapsed")
            next_tick = now + every
        time.sleep(0.5)


def _build_one(
    component: str,
    module_dir: Path,
    out_dir: Path,
    version: str,
    want: str,
    gomod_hash: str | None,
    progress: Progress,
    jobs: int,
    heartbeat_s: float,
    command: Callable[[Path], list[str]] | None = None,
    package: str | None = None,
) -> Path:
    """``command(output)``/``package``: the go build argv and the package for a component
    outside :data:`PACKAGES` (Kueue, see :mod:`.kueuebuild`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / component
    tmp = out_dir / f".{component}.partial"
    log = out_dir / f"{component}.build.log"
    cmd = command(tmp) if command else go_build_command(component, tmp, version, jobs)
    started = time.monotonic()
    with open(log, "w") as fh:
        fh.write("# cwd: " + str(module_dir) + "\n# " + " ".join(cmd) + "\n")
        fh.flush()
        try:
            proc = subprocess.Popen(
                cmd, cwd=module_dir, env=build_env(), stdout=fh, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            raise GoNotFoundError(f"cannot run go: {exc}") from exc
        try:
            rc, peak_mib = _wait(proc, component, started, progress, heartbeat_s)
        except BaseException:
            proc.kill()
            proc.wait()
            tmp.unlink(missing_ok=True)
            raise
    elapsed = time.monotonic() - started
    if rc != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [ln for ln in (_read(log) or "").splitlines() if ln and not ln.startswith("#")]
        tail = " | ".join(lines[-3:]) or "no output"
        raise BuildError(
            f"building {component} failed after {_fmt_elapsed(elapsed)} (exit {rc}): {tail} "
            f"(full log: {log})"
        )
    os.replace(tmp, final)
    size_mib = final.stat().st_size / 2**20
    peak = f", peak RSS {peak_mib / 1024:.1f} GiB" if peak_mib else ""
    progress(
        f"  built {component} in {_fmt_elapsed(elapsed)} ({size_mib:.0f} MiB{peak}) -> {final}"
    )
    _write_stamp(
        out_dir,
        component,
        {
            "version": want,
            "package": package or PACKAGES[component],
            "gomod_sha256": gomod_hash,
            "go": go_version(),
            "seconds": round(elapsed, 1),
            "peak_rss_mib": round(peak_mib) if peak_mib else None,
            "size_bytes": final.stat().st_size,
        },
    )
    return final


def _load_gen_replaces(controlplane: Path):
    spec = importlib.util.spec_from_file_location(
        "gpu_lab_gen_replaces", controlplane / "gen_replaces.py"
    )
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot load {controlplane / 'gen_replaces.py'}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tidy(module_dir: Path, progress: Progress) -> None:
    progress(f"  go mod tidy in {module_dir} (downloads modules through GOPROXY)")
    res = subprocess.run(
        ["go", "mod", "tidy"],
        cwd=module_dir,
        env={**build_env(), "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        tail = " | ".join(res.stderr.strip().splitlines()[-3:])
        raise BuildError(f"go mod tidy failed in {module_dir}: {tail}")


def _known_module_dir(kind: str, pin: str, cache_root: Path) -> Path | None:
    """The committed wrapper module if it pins ``pin``, else an already generated one."""
    module = "k8s.io/kubernetes" if kind == "kubernetes" else PACKAGES["etcd"]
    committed = repo_controlplane_dir() / kind
    text = _read(committed / "go.mod")
    if text is not None and _gomod_field(text, "require", module) == pin:
        return committed
    gen_dir = cache_root / "src" / f"{kind}-{pin}"
    if (gen_dir / "go.mod").is_file() and (gen_dir / "go.sum").is_file():
        return gen_dir
    return None


def wrapper_module(kind: str, pin: str, cache_root: Path, progress: Progress = print) -> Path:
    """Directory of the wrapper module that pins ``kind`` (``kubernetes``/``etcd``) at ``pin``.

    The committed module in ``controlplane/`` is used when it pins that version; any other
    version gets a generated module under ``<cache>/src/`` (``go mod tidy`` resolves it).
    """
    known = _known_module_dir(kind, pin, cache_root)
    if known is not None:
        return known
    controlplane = repo_controlplane_dir()
    module = "k8s.io/kubernetes" if kind == "kubernetes" else PACKAGES["etcd"]
    gen_dir = cache_root / "src" / f"{kind}-{pin}"
    gomod = gen_dir / "go.mod"
    gen_dir.mkdir(parents=True, exist_ok=True)
    if kind == "kubernetes":
        if not (controlplane / "gen_replaces.py").is_file():
            raise BuildError(
                f"{controlplane / 'gen_replaces.py'} not found: run from a gpu-lab checkout "
                "or set GPU_LAB_CONTROLPLANE_DIR"
            )
        gen = _load_gen_replaces(controlplane)
        try:
            src = gen.kubernetes_gomod(pin)
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            raise BuildError(f"cannot fetch k8s.io/kubernetes@{pin}: {detail.strip()}") from exc
        gomod.write_text(gen.render(src, pin))
    else:
        gomod.write_text(
            "module gpulab.dev/controlplane/etcd\n\n"
            f"go {FALLBACK_GO_VERSION}\n\n"
            f"tool {module}\n\n"
            f"require {module} {pin}\n"
        )
    _tidy(gen_dir, progress)
    return gen_dir


def _gomod_hash(module_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        h.update((_read(module_dir / name) or "").encode())
    return h.hexdigest()


def build(
    components: Iterable[str] = ALL,
    version: str = DEFAULT_VERSION,
    cache_dir: Path | str | None = None,
    progress: Progress = print,
    *,
    etcd_version: str | None = None,
    force: bool = False,
    use_path: bool = True,
    jobs: int = JOBS,
    heartbeat_s: float = 30.0,
) -> dict[str, Path]:
    """Build (or find) the control plane binaries; return ``{component: path}``.

    One component at a time, ``go build -p jobs``; a component whose cached binary
    (or one on ``PATH`` unless ``use_path=False``) already reports the right version is
    not rebuilt unless ``force``.  Raises :class:`BuildError` (one line) on failure and
    :class:`GoNotFoundError` when something must be built and ``go`` is missing.
    """
    comps = list(dict.fromkeys(components))
    unknown = [c for c in comps if c not in PACKAGES]
    if unknown:
        raise BuildError(f"unknown component(s) {', '.join(unknown)}; choose from "
                         f"{', '.join((*ALL, *NODE_COMPONENTS))}")
    _minor(version)
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    ev = etcd_version or etcd_version_for()
    dirs = output_dirs(version, root, ev)
    pins = {"kubernetes": version, "etcd": ev}

    def up_to_date(c: str) -> bool:
        known = _known_module_dir(_kind(c), pins[_kind(c)], root)
        gh = _gomod_hash(known) if known is not None else None
        want = expected_version(c, version, ev)
        return _is_good(c, dirs[c] / c, want) and _stamp_ok(dirs[c], c, gh)

    result: dict[str, Path] = {}
    todo: list[str] = []
    for c in comps:
        want = expected_version(c, version, ev)
        cached = dirs[c] / c
        if not force:
            if up_to_date(c):
                progress(f"{c} {want}: up to date ({cached})")
                result[c] = cached
                continue
            found = _find_one(c, dirs[c], want, use_path)
            if found is not None and found != cached:
                progress(f"{c} {want}: using {found} from PATH")
                result[c] = found
                continue
        todo.append(c)
    if not todo:
        return result

    gv = require_go({c: expected_version(c, version, ev) for c in todo}, _min_go())
    progress(f"building {', '.join(todo)} with go {gv} into {root} (one at a time, -p {jobs})")
    total = time.monotonic()
    with _locked(root):
        for i, c in enumerate(todo, 1):
            want = expected_version(c, version, ev)
            if not force and up_to_date(c):  # built meanwhile by another process
                result[c] = dirs[c] / c
                continue
            module_dir = wrapper_module(_kind(c), pins[_kind(c)], root, progress)
            progress(f"[{i}/{len(todo)}] {c} {want} ({PACKAGES[c]})")
            path = _build_one(
                c,
                module_dir,
                dirs[c],
                version,
                want,
                _gomod_hash(module_dir),
                progress,
                jobs,
                heartbeat_s,
            )
            got = reported_version(c, path)
            if got != want:
                raise BuildError(f"{path} --version reports {got!r}, expected {want!r}")
            result[c] = path
    progress(f"done in {_fmt_elapsed(time.monotonic() - total)}")
    return {c: result[c] for c in comps}


def _kind(component: str) -> str:
    return "etcd" if component == "etcd" else "kubernetes"


def _min_go() -> str:
    text = _read(repo_controlplane_dir() / "kubernetes" / "go.mod") or ""
    return _gomod_field(text, "go") or FALLBACK_GO_VERSION


# --------------------------------------------------------------------------- CLI
