"""Build Kueue's manager from the pinned ``sigs.k8s.io/kueue`` module, next to the control
plane binaries, and keep the manifests a lab installs (CRDs, webhook configurations) with it.

``controlplane/kueue/`` is a wrapper module like ``controlplane/etcd/``: it requires
``sigs.k8s.io/kueue`` (whose go.mod has no ``replace`` directives, so every dependency
resolves to the version Kueue itself requires) and ``go build`` compiles its
``cmd/kueue`` package, the binary Kueue's release image calls ``manager``::

    ~/.cache/gpu-lab/bin/kueue-v0.17.0/kueue
    ~/.cache/gpu-lab/bin/kueue-v0.17.0/manifests/config/components/{crd,webhook,internalcert}/...
    ~/.cache/gpu-lab/bin/kueue-v0.17.0/manifests/config/default/kustomization.yaml

The manifests are copied out of the module zip that ``go mod download`` fetched (the same
bytes the binary was built from), so starting Kueue later needs neither Go nor the network.
The manager has no ``--version`` flag; its version is read from the Go build information
in the binary (what ``go version -m`` prints: ``dep sigs.k8s.io/kueue v0.17.0``).

    gpu-lab controlplane build --with kueue
"""

from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ...errors import BuildError, GoNotFoundError, KueueNotBuilt
from . import build as b

COMPONENT = "kueue"
MODULE = "sigs.k8s.io/kueue"
PACKAGE = "sigs.k8s.io/kueue/cmd/kueue"
#: the newest release the Go module proxy served when this was pinned
#: (``GOFLAGS=-mod=mod go list -m -versions sigs.k8s.io/kueue``)
DEFAULT_VERSION = "v0.17.0"
FALLBACK_GO_VERSION = "1.25.0"
#: what a lab needs from the module: CRDs, webhook configurations, the cert Secret, and
#: config/default's kustomization (the namespace and name prefix of a stock install)
MANIFEST_DIRS = (
    "config/components/crd/",
    "config/components/webhook/",
    "config/components/internalcert/",
)
MANIFEST_FILES = ("config/default/kustomization.yaml",)
MANIFESTS = "manifests"



@dataclass(frozen=True)
class KueueInstall:
    """A built Kueue: the manager binary and the manifests of the same release."""

    version: str
    binary: Path
    manifests: Path


def output_dir(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir is not None else b.default_cache_dir()
    return root / f"kueue-{version}"


def module_version(binary: Path | str) -> str | None:
    """The ``sigs.k8s.io/kueue`` version recorded in the binary's Go build information
    (``mod``: the module of the main package, as ``go version -m`` prints it)."""
    try:
        with open(binary, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for key in (b"mod", b"dep"):
                needle = b"\n" + key + f"\t{MODULE}\t".encode()
                at = m.rfind(needle)  # the build information sits near the end
                if at >= 0:
                    tail = m[at + len(needle): at + len(needle) + 64]
                    return tail.split(b"\t", 1)[0].split(b"\n", 1)[0].decode(errors="replace")
    except (OSError, ValueError):
        return None
    return None


def _complete(manifests: Path) -> bool:
    return all((manifests / d).is_dir() for d in MANIFEST_DIRS) and all(
        (manifests / f).is_file() for f in MANIFEST_FILES
    )


def find_kueue(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> KueueInstall | None:
    """The cached Kueue of ``version`` (binary reporting it, manifests present), else None."""
    out = output_dir(version, cache_dir)
    binary = out / COMPONENT
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return None
    if module_version(binary) != version or not _complete(out / MANIFESTS):
        return None
    return KueueInstall(version, binary, out / MANIFESTS)


def require_kueue(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> KueueInstall:
    found = find_kueue(version, cache_dir)
    if found is None:
        raise KueueNotBuilt(
            f"Kueue {version} not built: run `gpu-lab controlplane build --with kueue` "
            "(needs Go), or `gpu-lab up --with kueue`, which builds it first"
        )
    return found


# --------------------------------------------------------------------------- module


def _known_module(pin: str, cache_root: Path) -> Path | None:
    committed = b.repo_controlplane_dir() / "kueue"
    text = b._read(committed / "go.mod")
    if text is not None and b._gomod_field(text, "require", MODULE) == pin:
        return committed
    gen = cache_root / "src" / f"kueue-{pin}"
    if (gen / "go.mod").is_file() and (gen / "go.sum").is_file():
        return gen
    return None


def wrapper_module(pin: str, cache_root: Path, progress: b.Progress = print) -> Path:
    """``controlplane/kueue`` when it pins ``pin``, else a module generated under
    ``<cache>/src/kueue-<pin>`` (``go mod tidy`` resolves it)."""
    known = _known_module(pin, cache_root)
    if known is not None:
        return known
    gen = cache_root / "src" / f"kueue-{pin}"
    gen.mkdir(parents=True, exist_ok=True)
    (gen / "go.mod").write_text(
        "module gpulab.dev/controlplane/kueue\n\n"
        f"go {FALLBACK_GO_VERSION}\n\n"
        f"tool {PACKAGE}\n\n"
        f"require {MODULE} {pin}\n"
    )
    b._tidy(gen, progress)
    return gen


def _min_go() -> str:
    text = b._read(b.repo_controlplane_dir() / "kueue" / "go.mod") or ""
    return b._gomod_field(text, "go") or FALLBACK_GO_VERSION


def go_build_command(output: Path, version: str = DEFAULT_VERSION, jobs: int = b.JOBS) -> list[str]:
    """Kueue's Makefile stamps ``pkg/version.GitVersion``; the manager logs it at start."""
    ldflags = f"-s -w -X {MODULE}/pkg/version.GitVersion={version}"
    return ["go", "build", "-p", str(jobs), "-trimpath", "-ldflags", ldflags, "-o", str(output),
            PACKAGE]


def module_zip(module_dir: Path, version: str) -> Path:
    """The module zip ``go mod download`` keeps in the module cache (downloads it if needed)."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        cwd=module_dir, env=b.build_env(), capture_output=True, text=True,
    )
    try:
        doc = json.loads(res.stdout or "{}")
    except ValueError:
        doc = {}
    if res.returncode != 0 or not doc.get("Zip"):
        detail = doc.get("Error") or res.stderr.strip().splitlines()[-1:] or ["no output"]
        raise BuildError(f"go mod download {MODULE}@{version} failed: {''.join(detail)}")
    return Path(doc["Zip"])


def extract_manifests(zip_path: Path, version: str, dest: Path) -> int:
    """Copy :data:`MANIFEST_DIRS` and :data:`MANIFEST_FILES` out of the module zip into
    ``dest`` (replaced whole); return how many files."""
    prefix = f"{MODULE}@{version}/"
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    with zipfile.ZipFile(zip_path) as z:
        for name in z.namelist():
            rel = name[len(prefix):] if name.startswith(prefix) else None
            if not rel or name.endswith("/") or ".." in Path(rel).parts:
                continue
            if rel in MANIFEST_FILES or rel.startswith(MANIFEST_DIRS):
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
                n += 1
    if not _complete(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(f"{zip_path} lacks Kueue's manifests ({', '.join(MANIFEST_DIRS)})")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return n


# --------------------------------------------------------------------------- build


def build(
    version: str = DEFAULT_VERSION,
    cache_dir: Path | str | None = None,
    progress: b.Progress = print,
    *,
    force: bool = False,
    jobs: int = b.JOBS,
    heartbeat_s: float = 30.0,
) -> KueueInstall:
    """Build (or find) Kueue's manager and its manifests; one line of progress per step
    and a heartbeat while ``go build`` runs. Raises :class:`~gpu_lab.errors.BuildError`."""
    if not re.match(r"^v\d+\.\d+\.\d+", version):
        raise BuildError(f"not a Kueue release: {version!r} (expected v0.X.Y)")
    root = Path(cache_dir).expanduser() if cache_dir is not None else b.default_cache_dir()
    out = output_dir(version, root)

    def up_to_date() -> KueueInstall | None:
        found = find_kueue(version, root)
        known = _known_module(version, root)
        gh = b._gomod_hash(known) if known is not None else None
        if found is None or not b._stamp_ok(out, COMPONENT, gh):
            return None
        return found

    if not force:
        found = up_to_date()
        if found is not None:
            progress(f"kueue {version}: up to date ({found.binary})")
            return found
    if b.go_version() is None:
        raise GoNotFoundError(f"Go toolchain not found: install Go >= {_min_go()} to build "
                                f"Kueue {version} (`gpu-lab controlplane build --with kueue`)")
    gv = b.require_go({COMPONENT: version}, _min_go())
    progress(f"building kueue {version} with go {gv} into {out} (-p {jobs})")
    t0 = time.monotonic()
    with b._locked(root):
        if not force:
            found = up_to_date()
            if found is not None:  # built meanwhile by another process
                return found
        module_dir = wrapper_module(version, root, progress)
        progress(f"[1/2] kueue manager {version} ({PACKAGE})")
        binary = b._build_one(
            COMPONENT, module_dir, out, version, version, b._gomod_hash(module_dir), progress,
            jobs, heartbeat_s,
            command=lambda tmp: go_build_command(tmp, version, jobs), package=PACKAGE,
        )
        got = module_version(binary)
        if got != version:
            raise BuildError(f"{binary} was built from {MODULE} {got!r}, expected {version!r}")
        progress(f"[2/2] kueue manifests (CRDs, webhooks) from the {MODULE}@{version} module zip")
        n = extract_manifests(module_zip(module_dir, version), version, out / MANIFESTS)
        progress(f"  {n} files -> {out / MANIFESTS}")
    progress(f"done in {b._fmt_elapsed(time.monotonic() - t0)}")
    return KueueInstall(version, binary, out / MANIFESTS)


__all__ = [
    "COMPONENT",
    "DEFAULT_VERSION",
    "KueueInstall",
    "KueueNotBuilt",
    "build",
    "find_kueue",
    "module_version",
    "require_kueue",
]
