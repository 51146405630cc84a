"""kube-scheduler's configuration file: the one a user sets, checked by kube-scheduler.

A lab keeps three files in ``config/``: ``kube-scheduler.custom.yaml`` (what the user
set, saved only once kube-scheduler accepted it), ``kube-scheduler.yaml`` (what
kube-scheduler runs: the custom one, or the defaults, with gpu-lab's kubeconfig and no
leader election) and ``kube-scheduler.effective.yaml`` (the running configuration as
kube-scheduler completes it, every profile's plugins with their weights, for explain).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gpu_lab.errors import LocalClusterError

from ...kube import kubeconfig as kc
from .components import APISERVER, SCHEDULER
from .flags import FEATURE_GATES, env
from .labdir import LabDir

#: the time kube-scheduler may take to check a configuration (it needs about 0.1 s)
VALIDATE_TIMEOUT_S = 30.0


def custom_path(lab: LabDir) -> Path:
    return lab.config_dir / "kube-scheduler.custom.yaml"


def effective_path(lab: LabDir) -> Path:
    return lab.config_dir / "kube-scheduler.effective.yaml"


def running_path(lab: LabDir) -> Path:
    return lab.config_dir / "kube-scheduler.yaml"


def saved(lab: LabDir) -> dict[str, Any] | None:
    """The configuration the user set (``None``: kube-scheduler's defaults)."""
    with contextlib.suppress(OSError, yaml.YAMLError):
        loaded = yaml.safe_load(custom_path(lab).read_text())
        if isinstance(loaded, dict):
            return loaded
    return None


def config_text(
    lab: LabDir, custom: dict[str, Any] | None = None, kubeconfig: Path | None = None
) -> str:
    """The file kube-scheduler runs with: ``custom`` (else the saved configuration) with
    gpu-lab's client connection and no leader election."""
    doc: dict[str, Any] = dict(saved(lab) or {} if custom is None else custom)
    doc.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
    doc.setdefault("kind", "KubeSchedulerConfiguration")
    conn = doc.get("clientConnection")
    doc["clientConnection"] = {
        **(conn if isinstance(conn, dict) else {}),
        "kubeconfig": str(kubeconfig or lab.config_dir / f"{SCHEDULER}.kubeconfig"),
    }
    doc["leaderElection"] = {"leaderElect": False}
    return yaml.safe_dump(doc, sort_keys=False)


def write_running(lab: LabDir) -> None:
    kc.write(running_path(lab), config_text(lab))


def _write_running_if_configured(lab: LabDir) -> None:
    # before the first ``up`` there is no port yet: that ``up`` writes it
    if lab.state.load()["ports"].get(APISERVER):
        write_running(lab)


def validate(lab: LabDir, config: dict[str, Any]) -> dict[str, Any]:
    """Check ``config`` as kube-scheduler itself does when it starts (strict decoding,
    validation, every profile's plugins and their args built), without an API server:
    the real binary with ``--write-config-to``, which exits once the configuration is
    complete. Returns that completed configuration (defaults and weights filled in by
    kube-scheduler); raises :class:`LocalClusterError` with kube-scheduler's own words."""
    if not isinstance(config, dict):
        raise LocalClusterError(
            f"KubeSchedulerConfiguration: expected a mapping, not {type(config).__name__}"
        )
    binary = lab.state.resolve_binaries(lab.state.load())[SCHEDULER]
    with tempfile.TemporaryDirectory(prefix="gpu-lab-ksc-") as tmp:
        t = Path(tmp)
        kcfg = t / "kubeconfig"  # never contacted: kube-scheduler exits before it connects
        kcfg.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
            "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"
            "users: [{name: x, user: {}}]\n"
            "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
        )
        (t / "config.yaml").write_text(config_text(lab, config, kcfg))
        argv = [str(binary), f"--config={t / 'config.yaml'}",
                f"--write-config-to={t / 'out.yaml'}", "--secure-port=0",
                f"--feature-gates={FEATURE_GATES}"]
        try:
            res = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=VALIDATE_TIMEOUT_S, stdin=subprocess.DEVNULL,
                                 env=env(), cwd=tmp)
        except subprocess.TimeoutExpired:
            raise LocalClusterError(
                "KubeSchedulerConfiguration: kube-scheduler did not finish checking it "
                f"in {VALIDATE_TIMEOUT_S:.0f} s"
            ) from None
        except OSError as exc:
            raise LocalClusterError(f"cannot run {binary}: {exc.strerror}") from None
        if res.returncode != 0:
            raise LocalClusterError(
                f"KubeSchedulerConfiguration: kube-scheduler refuses it: {_go_error(res.stderr)}"
            )
        return yaml.safe_load((t / "out.yaml").read_text()) or {}


def effective(lab: LabDir) -> dict[str, Any]:
    """The running configuration as kube-scheduler completes it, computed once per
    configuration."""
    path = effective_path(lab)
    try:
        return yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        pass
    done = validate(lab, saved(lab) or {})
    lab.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    kc.write(path, yaml.safe_dump(done, sort_keys=False))
    return done


def save(lab: LabDir, config: dict | None) -> None:
    """Save ``config`` once kube-scheduler accepts it (``None``: back to the defaults) and
    rewrite the file kube-scheduler runs with; a running scheduler reads it when it
    restarts."""
    lab.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    custom, done_path = custom_path(lab), effective_path(lab)
    if config is None:
        custom.unlink(missing_ok=True)
        done_path.unlink(missing_ok=True)
    else:
        done = validate(lab, config)
        kc.write(custom, yaml.safe_dump(config, sort_keys=False))
        kc.write(done_path, yaml.safe_dump(done, sort_keys=False))
    _write_running_if_configured(lab)


def check_saved(lab: LabDir, say: Callable[[str], object]) -> None:
    """Before kube-scheduler starts: a saved configuration it would refuse (saved by an
    older gpu-lab, or checked by another build) is set aside, so the lab starts."""
    config = saved(lab)
    if config is None:
        return
    try:
        validate(lab, config)
    except LocalClusterError as err:
        set_aside(lab, str(err), say)


def set_aside(lab: LabDir, why: str, say: Callable[[str], object]) -> None:
    """Run kube-scheduler with the defaults; keep the refused configuration beside."""
    custom = custom_path(lab)
    aside = custom.with_name("kube-scheduler.rejected.yaml")
    with contextlib.suppress(OSError):
        os.replace(custom, aside)
    effective_path(lab).unlink(missing_ok=True)
    _write_running_if_configured(lab)
    say(f"  {SCHEDULER}: the saved configuration was refused ({why[:300]}); "
        f"starting it with the default one (the refused one is kept in {aside})")


def _go_error(stderr: str) -> str:
    """The message of a Go component's last ``"command failed" err="..."`` log line."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r'err="((?:[^"\\]|\\.)*)"', ln)
        if m:
            try:
                return json.loads(f'"{m.group(1)}"')
            except ValueError:
                return m.group(1)
    return lines[-1].strip() if lines else "no output"


__all__ = [
    "VALIDATE_TIMEOUT_S",
    "check_saved",
    "config_text",
    "custom_path",
    "effective",
    "effective_path",
    "running_path",
    "save",
    "saved",
    "set_aside",
    "validate",
    "write_running",
]
