"""Write and read the small kubeconfigs a local lab uses.

Written kubeconfigs name the certificate files by absolute path (they live in the lab's
``pki/``), so ``kubectl --kubeconfig <lab>/kubeconfig`` works and nothing secret is
copied around. :func:`load` also understands ``*-data`` fields (base64 PEM), as in
kubeconfigs written by kind or cloud CLIs, and materialises them as 0600 temp files.

Users authenticate the ways client-go supports without a browser: a client certificate, a
``token`` or ``tokenFile``, or an ``exec`` credential plugin (EKS, GKE, AKS; see
:mod:`gpu_lab.backends.local.execcredential`). ``auth-provider`` (the in-tree gcp, azure and
oidc providers) and basic authentication are refused with one line naming the exec plugin
to use instead.
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

from . import execcredential


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
    #: the user's exec credential plugin (shared by every client of these credentials);
    #: the client asks it for a token or certificate before each request
    exec: execcredential.ExecPlugin | None = None


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


def materialise(data: bytes, suffix: str) -> str:
    """``data`` (PEM) in a 0600 temp file, removed when the process exits."""
    fd, path = tempfile.mkstemp(prefix="gpu-lab-kubeconfig-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    _TEMP.append(path)
    return path


def _materialise(b64: str, suffix: str) -> str:
    return materialise(base64.b64decode(b64), suffix)


#: auth-provider name -> the exec plugin that replaces it (kubectl dropped the in-tree gcp
#: and azure providers in Kubernetes 1.26; oidc has no in-tree successor but kubelogin)
AUTH_PROVIDER_PLUGINS = {
    "gcp": "gke-gcloud-auth-plugin (`gcloud components install gke-gcloud-auth-plugin`, then "
    "`gcloud container clusters get-credentials` writes the exec stanza)",
    "azure": "kubelogin (`kubelogin convert-kubeconfig -l azurecli` writes the exec stanza)",
    "oidc": "kubelogin (int128/kubelogin: `kubectl oidc-login setup` prints the exec stanza; "
    "log in once in a shell so that it answers from its token cache)",
}


def _refuse_auth_provider(source: Path, user_name: str, provider: object) -> None:
    name = (provider or {}).get("name", "?") if isinstance(provider, dict) else "?"
    instead = AUTH_PROVIDER_PLUGINS.get(name, "the provider's exec credential plugin")
    raise KubeconfigError(
        f"{source}: user {user_name!r} authenticates with the {name!r} auth-provider, which "
        f"gpu-lab does not run; use an exec credential plugin instead: {instead}"
    )


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

    user_name = ctx.get("user", "")
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token_file = Path(_path(user["tokenFile"], base) or "")
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise KubeconfigError(
                f"{source}: cannot read tokenFile {token_file} of user {user_name!r}: "
                f"{exc.strerror}"
            ) from exc
    has_cert = bool(user.get("client-certificate") or user.get("client-certificate-data"))
    plugin = None
    if user.get("exec") and user.get("auth-provider"):
        raise KubeconfigError(
            f"{source}: invalid configuration: authProvider cannot be provided in combination "
            f"with an exec plugin for {user_name}"
        )
    if user.get("exec") and not token:  # as in client-go, a static token wins over exec
        try:
            cfg = execcredential.parse_config(user["exec"], user_name, base)
            info = (
                execcredential.cluster_info(cluster, base)
                if cfg.provide_cluster_info
                else {"server": cluster["server"]}  # only keys the shared runner
            )
        except execcredential.ExecCredentialError as exc:
            raise execcredential.ExecCredentialError(f"{source}: {exc}") from None
        plugin = execcredential.plugin_for(cfg, info)
    elif user.get("auth-provider") and not (token or has_cert):
        _refuse_auth_provider(source, user_name, user["auth-provider"])
    elif (user.get("username") or user.get("password")) and not (token or has_cert):
        raise KubeconfigError(
            f"{source}: user {user_name!r} authenticates with basic authentication (username "
            "and password), which kube-apiserver no longer accepts (removed in Kubernetes "
            "1.19); use a client certificate, a token or an exec credential plugin"
        )
    return Credentials(
        server=cluster["server"].rstrip("/"),
        ca_file=pick(cluster, "certificate-authority", ".crt"),
        cert_file=pick(user, "client-certificate", ".crt"),
        key_file=pick(user, "client-key", ".key"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        context=ctx_name,
        exec=plugin,
    )
