"""Write and read the small kubeconfigs a local lab uses.

Written kubeconfigs name the certificate files by absolute path (they live in the lab's
``pki/``), so ``kubectl --kubeconfig <lab>/kubeconfig`` works and nothing secret is
copied around. :func:`load` also understands ``*-data`` fields (base64 PEM), as in
kubeconfigs written by kind or cloud CLIs, and materialises them as 0600 temp files.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpu_lab.errors import GpuLabError


class KubeconfigError(GpuLabError):
    """A kubeconfig that cannot be used (one line)."""


@dataclass(frozen=True)
class Credentials:
    """What an HTTPS client needs to talk to one API server."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False
    context: str = ""


def render(
    server: str,
    ca_file: Path,
    cert_file: Path,
    key_file: Path,
    user: str,
    cluster: str = "gpu-lab",
    context: str | None = None,
    namespace: str | None = None,
) -> str:
    ctx = context or f"{user}@{cluster}"
    ctx_body: dict = {"cluster": cluster, "user": user}
    if namespace:
        ctx_body["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(cert_file),
                    "client-key": str(key_file),
                },
            }
        ],
        "contexts": [{"name": ctx, "context": ctx_body}],
        "current-context": ctx,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: Path, text: str) -> Path:
    """Write a kubeconfig with mode 0600 (atomically; unchanged content is left alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            os.chmod(path, 0o600)
            return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


_TEMP: list[str] = []


@atexit.register
def _cleanup() -> None:
    for p in _TEMP:
        with contextlib.suppress(OSError):
            os.unlink(p)


def _materialise(b64: str, suffix: str) -> str:
    fd, path = tempfile.mkstemp(prefix="gpu-lab-kubeconfig-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(b64))
    _TEMP.append(path)
    return path


def _named(items: list | None, name: str, what: str, source: Path) -> dict:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(what) or {}
    raise KubeconfigError(f"{source}: no {what} named {name!r}")


def _path(value: str | None, base: Path) -> str | None:
    if not value:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def load(path: Path | str, context: str | None = None) -> Credentials:
    """The server and TLS material of ``context`` (default: current-context) in a kubeconfig."""
    source = Path(path).expanduser()
    try:
        doc = yaml.safe_load(source.read_text()) or {}
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {source}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{source} is not valid YAML") from exc
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError(f"{source}: no current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context", source)
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "cluster", source)
    user = _named(doc.get("users"), ctx.get("user", ""), "user", source) if ctx.get("user") else {}
    base = source.parent
    if not cluster.get("server"):
        raise KubeconfigError(f"{source}: cluster {ctx.get('cluster')!r} has no server")

    def pick(obj: dict, field: str, suffix: str) -> str | None:
        if obj.get(f"{field}-data"):
            return _materialise(obj[f"{field}-data"], suffix)
        return _path(obj.get(field), base)

    token = user.get("token")
    if not token and user.get("tokenFile"):
        with contextlib.suppress(OSError):
            token = Path(_path(user["tokenFile"], base) or "").read_text().strip()
    return Credentials(
        server=cluster["server"].rstrip("/"),
        ca_file=pick(cluster, "certificate-authority", ".crt"),
        cert_file=pick(user, "client-certificate", ".crt"),
        key_file=pick(user, "client-key", ".key"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        context=ctx_name,
    )
