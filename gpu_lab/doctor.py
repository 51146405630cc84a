"""``gpu-lab doctor``: what this machine has for the curriculum, what each missing piece
disables, and the exact command that fixes it.

Every line is measured on this machine, nothing is assumed: Python packages are read from
their installed metadata (``importlib.metadata``), the control-plane binaries are found and
asked for ``--version`` the way ``gpu-lab controlplane build`` checks them
(:func:`gpu_lab.backends.local.build.find_binaries`), Go, Docker, kind and ``nvidia-smi`` are
looked up on ``PATH`` and run with a short timeout, and the GPUs are read through NVML when
``nvidia-smi`` is absent.

Exit status: 0 when the curriculum can run on the embedded scheduler (``sim``): Python
3.10+, the package's own dependencies and the notebook stack. 1 otherwise. Everything else
(the real control plane, kind, a GPU) is optional and only reported, with what it enables.

    gpu-lab doctor [--json]
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .backends.kind import build as kb
from .backends.kind import config as kc
from .backends.local import build as b
from .backends.local import kueuebuild as k
from .errors import NoDriver
from .probe import probe

#: seconds a version query may take before it counts as broken
TIMEOUT_S = 20

# (distribution, minimum version, needed for the sim curriculum, what it is for / what its
# absence disables). The minimums are pyproject.toml's.
PACKAGES: tuple[tuple[str, str, bool, str], ...] = (
    ("pyyaml", "6", True, "scenario YAML: nothing in gpu-lab runs without it"),
    ("numpy", "1.24", True, "the scheduler model's arithmetic: nothing runs without it"),
    ("pandas", "2.0", True, "every table (pods(), nodes(), explain()): nothing runs without it"),
    ("grpcio", "1.85", True, "the fake device plugin (lesson 01's gRPC flow, connect(\"local\"))"),
    ("protobuf", "7.35.1", True, "the device-plugin messages (lesson 01)"),
    ("jupyterlab", "4", True, "opening the lessons (`make lab`)"),
    ("ipykernel", "6", True, "running notebook cells"),
    ("altair", "5", True, "every chart in the lessons (gpu_lab.charts)"),
    ("vl-convert-python", "1.6", True,
     "charts drawn offline as SVG/PNG; without it charts need a CDN and stay blank offline"),
    ("ipywidgets", "8", True,
     "interactive drill flashcards and what-if dropdowns (a static fallback renders without)"),
    ("nvidia-ml-py", "12.535", False, "`gpu-lab probe` (NVML discovery of real GPUs)"),
    ("cryptography", "42", False, "the local control plane's CA and certificates (connect(\"local\"))"),
    ("kubernetes", "37.0.2", False,
     "the client under connect(\"local\"/\"kind\"/\"kubeconfig\") (gpu_lab/kube: kubeconfig loading, "
     "the HTTP client, watch streams); the sim runs without it"),
)
#: the pip extra that brings each package (for the fix command)
_EXTRA = {"jupyterlab": "lab", "ipykernel": "lab", "altair": "lab", "vl-convert-python": "lab",
          "ipywidgets": "lab", "nvidia-ml-py": "gpu"}


@dataclass
class Check:
    group: str  # "python", "package", "controlplane", "go", "docker", "kind", "gpu"
    name: str
    ok: bool
    version: str | None = None
    detail: str = ""  # where it was found, or why it is missing
    required: bool = False  # needed for the sim curriculum
    disables: str = ""  # what does not work while it is missing
    fix: str = ""  # the exact command that fixes it

    def status(self) -> str:
        if self.ok:
            return "ok"
        return "MISSING" if self.required else "absent"


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    @property
    def sim_ready(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    def to_dict(self) -> dict:
        return {
            "sim_ready": self.sim_ready,
            "python": sys.executable,
            "checks": [asdict(c) | {"status": c.status()} for c in self.checks],
            "missing": [c.name for c in self.checks if not c.ok],
        }


# --------------------------------------------------------------------------- helpers


def _run(argv: list[str], timeout: float = TIMEOUT_S) -> tuple[int, str] | None:
    """(exit code, stdout+stderr) of a command, or None when it cannot start or hangs."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.returncode, (res.stdout or "") + (res.stderr or "")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def _at_least(version: str, minimum: str) -> bool:
    if not minimum:
        return True
    try:
        from packaging.version import Version

        return Version(version) >= Version(minimum)
    except Exception:  # no packaging, or a version it cannot parse
        return _version_tuple(version) >= _version_tuple(minimum)


def _repo_root() -> Path | None:
    """The checkout this package runs from (an editable install), if any."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def _pip_fix(dist: str, minimum: str) -> str:
    py = shlex.quote(sys.executable)
    root = _repo_root()
    extra = _EXTRA.get(dist)
    if root is not None and dist != "kubernetes":
        target = f"-e '{root}[{extra}]'" if extra else f"-e '{root}'"
        return f"{py} -m pip install {target}"
    spec = f"{dist}>={minimum}" if minimum else dist
    return f"{py} -m pip install '{spec}'"


def _gpu_lab_command() -> str:
    """How to call ``gpu-lab`` from this environment (the venv's script when there is one)."""
    script = Path(sys.executable).parent / "gpu-lab"
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m gpu_lab.cli"


# --------------------------------------------------------------------------- checks


def check_python() -> Check:
    v = sys.version_info
    ok = v >= (3, 10)
    return Check("python", "python", ok, f"{v.major}.{v.minor}.{v.micro}", sys.executable,
                 required=True,
                 disables="" if ok else "everything: gpu-lab needs Python 3.10 or newer",
                 fix="" if ok else "install Python >= 3.10, then `make setup`")


def check_packages() -> list[Check]:
    out = []
    for dist, minimum, required, purpose in PACKAGES:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
        if version is None and dist == "kubernetes":
            continue  # optional and unused: only listed when present
        ok = version is not None and _at_least(version, minimum)
        detail = "" if ok else ("not installed" if version is None
                                else f"installed {version}, needs >= {minimum}")
        out.append(Check("package", dist, ok, version, detail or purpose, required=required,
                         disables="" if ok else purpose,
                         fix="" if ok else _pip_fix(dist, minimum)))
    return out


def check_controlplane() -> list[Check]:
    version = b.DEFAULT_VERSION
    etcd = b.etcd_version_for()
    where = b.default_cache_dir()
    out = []
    for component in b.ALL:
        found = b.find_binaries(version, components=[component], etcd_version=etcd)
        want = b.expected_version(component, version, etcd)
        if found:
            path = found[component]
            out.append(Check("controlplane", component, True, want, str(path)))
        else:
            out.append(Check(
                "controlplane", component, False, None,
                f"no {component} reporting {want} in {where} or on PATH",
                disables='connect("local") (the real kube-scheduler), `gpu-lab up`, the lessons\' '
                          "real-scheduler cells and the real-cluster tests (skipped locally, "
                          "failing in CI)",
                fix=f"{_gpu_lab_command()} controlplane build   "
                    "# needs Go; ~18 min the first time, then cached",
            ))
    return out


def check_kueue() -> Check:
    found = k.find_kueue()
    if found is not None:
        return Check("controlplane", "kueue", True, found.version, str(found.binary), required=False)
    return Check("controlplane", "kueue", False, None, f"no Kueue {k.DEFAULT_VERSION} built",
                 required=False,
                 disables="`gpu-lab up --with kueue` and the real-Kueue tests (skipped locally, failing in CI)",
                 fix=f"{_gpu_lab_command()} controlplane build --with kueue   # needs Go; ~3 min")


def check_go() -> Check:
    minimum = b._min_go()
    gv = b.go_version()
    ok = gv is not None and _at_least(gv, minimum)
    detail = shutil.which("go") or "not on PATH"
    if gv is not None and not ok:
        detail = f"go {gv} is older than {minimum}"
    return Check("go", "go", ok, gv, detail,
                 disables="" if ok else "building the control plane (`gpu-lab controlplane build`)",
                 fix="" if ok else f"install Go >= {minimum} (https://go.dev/doc/install) and put "
                 "its bin/ on PATH")


def check_docker() -> Check:
    exe = shutil.which("docker")
    off = 'connect("kind") (a kind cluster runs in Docker)'
    if exe is None:
        return Check("docker", "docker", False, None, "not on PATH", disables=off,
                     fix="apt-get install -y docker.io   # or Docker Desktop; then start the daemon")
    res = _run([exe, "version", "--format", "{{.Server.Version}}"])
    if res is None or res[0] != 0 or not res[1].strip():
        why = (res[1].strip().splitlines() or ["no answer"])[-1] if res else "timed out"
        return Check("docker", "docker", False, None, f"{exe}: daemon not reachable: {why}",
                     disables=off, fix="start the Docker daemon (`sudo systemctl start docker`, "
                     "or `sudo dockerd &`), and make sure your user may use it")
    return Check("docker", "docker", True, res[1].strip(), exe)


def check_kind(docker_ok: bool) -> list[Check]:
    """The kind CLI and the images, all made by ``gpu-lab kind build`` (nothing is pulled)."""

    off = 'connect("kind")'
    fix = "sudo gpu-lab kind build   # needs Go, gcc, debootstrap and Docker"
    exe = shutil.which("kind") or (str(kb.tool_path("kind") or "") or None)
    if exe is None:
        return [Check("kind", "kind", False, None, "not built (nor on PATH)", disables=off, fix=fix)]
    res = _run([exe, "version"])
    m = re.search(r"v(\d+\.\d+\.\d+)", res[1]) if res else None
    version = m.group(1) if m else None
    ok = version is not None and _version_tuple(version) >= kc.KIND_MIN_VERSION
    out = [Check("kind", "kind", ok, version, exe if ok else f"{exe}: needs >= {kc.KIND_RELEASE}",
                 disables="" if ok else off, fix="" if ok else fix)]
    if docker_ok:
        for image in (kc.NODE_IMAGE, kb.PLUGIN_IMAGE):
            res = _run(["docker", "image", "inspect", "--format", "{{.Id}}", image])
            have = res is not None and res[0] == 0
            out.append(Check("kind", f"image {image}", have, None,
                             "built" if have else "not built yet",
                             disables="" if have else off, fix="" if have else fix))
    return out


def check_gpu(nvml=None) -> Check:
    """NVIDIA driver and GPUs: ``nvidia-smi`` first, NVML (the probe) otherwise."""
    off = ("only real-GPU work: `gpu-lab probe` and running on real GPUs. The whole "
           "curriculum runs on simulated GPUs and needs none")
    fix = "optional: install NVIDIA's driver, then `pip install nvidia-ml-py` for `gpu-lab probe`"
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        res = _run([smi, "--query-gpu=name,driver_version,memory.total",
                    "--format=csv,noheader"])
        if res is not None and res[0] == 0 and res[1].strip():
            rows = [r.strip() for r in res[1].strip().splitlines() if r.strip()]
            names = [r.split(",")[0].strip() for r in rows]
            driver = rows[0].split(",")[1].strip() if "," in rows[0] else None
            return Check("gpu", "nvidia driver", True, driver,
                         f"{len(rows)} GPU(s): {', '.join(sorted(set(names)))} (nvidia-smi)")
    try:
        result = probe(nvml)
    except NoDriver as exc:
        why = str(exc)
        if smi is not None:
            why = f"nvidia-smi found but failed; {why}"
        return Check("gpu", "nvidia driver", False, None, why, disables=off, fix=fix)
    except Exception as exc:  # a broken binding must not break the doctor
        return Check("gpu", "nvidia driver", False, None, f"NVML failed: {exc}",
                     disables=off, fix=fix)
    names = sorted({g.name for g in result.gpus})
    return Check("gpu", "nvidia driver", True, result.driver_version,
                 f"{len(result.gpus)} GPU(s): {', '.join(names) or 'none'} (NVML)")


def diagnose(nvml=None) -> Report:
    r = Report()
    r.checks.append(check_python())
    r.checks += check_packages()
    r.checks += check_controlplane()
    r.checks.append(check_kueue())
    r.checks.append(check_go())
    docker = check_docker()
    r.checks.append(docker)
    r.checks += check_kind(docker.ok)
    r.checks.append(check_gpu(nvml))
    return r


# --------------------------------------------------------------------------- output

_TITLES = {"python": "Python", "package": "Python packages",
           "controlplane": "Control plane (real Kubernetes binaries)", "go": "Go",
           "docker": "Docker", "kind": "kind", "gpu": "NVIDIA GPUs"}


def render(report: Report) -> str:
    lines: list[str] = []
    group = None
    for c in report.checks:
        if c.group != group:
            group = c.group
            lines.append(("\n" if lines else "") + _TITLES[group])
        version = c.version or "-"
        lines.append(f"  {c.status():8} {c.name:26} {version:12} {c.detail}")
    missing = [c for c in report.checks if not c.ok]
    if missing:
        lines.append("\nWhat is missing, what it disables, and the fix")
        seen: set[str] = set()
        for c in missing:
            key = c.fix + c.disables
            if key in seen:  # four control-plane binaries share one fix
                continue
            seen.add(key)
            names = [m.name for m in missing if m.fix + m.disables == key]
            lines.append(f"  - {', '.join(names)}{' (required)' if c.required else ''}")
            lines.append(f"      disables: {c.disables}")
            lines.append(f"      fix:      {c.fix}")
    if report.sim_ready:
        lines.append("\nReady: the curriculum runs on the embedded scheduler (sim). "
                     "Open it with `make lab`.")
    else:
        lines.append("\nNot ready: the sim curriculum cannot run until the required pieces "
                     "above are installed.")
    return "\n".join(lines)


def main(argv: list[str] | None = None, nvml=None) -> int:
    p = argparse.ArgumentParser(
        prog="gpu-lab doctor",
        description="What this machine has for gpu-lab, what each missing piece disables, "
        "and the command that fixes it. Exit 0 when the sim curriculum can run, 1 otherwise.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    report = diagnose(nvml)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render(report))
    return 0 if report.sim_ready else 1


if __name__ == "__main__":
    sys.exit(main())
