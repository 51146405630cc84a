"""Kubeconfigs: read with the official ``kubernetes`` package, written for local labs.

:func:`load` lets ``kubernetes.config``'s ``KubeConfigLoader`` resolve a context (server,
CA, client certificate and key relative to the kubeconfig, ``*-data`` fields as 0600 temp
files, ``token``/``tokenFile``, ``tls-server-name``, ``proxy-url``) into
:class:`Credentials`; :func:`in_cluster` does the same for a pod's ServiceAccount
(``kubernetes.config.load_incluster_config``, whose token is re-read as it rotates).

Users authenticate the ways client-go supports without a browser: a client certificate, a
``token`` or ``tokenFile``, or an ``exec`` credential plugin (EKS, GKE, AKS; OIDC through
kubelogin). gpu-lab runs exec plugins itself (:mod:`gpu_lab.kube.execcredential`): the
package's runner has no shared cache, no retry after a 401 and logs a failure instead of
raising it. ``auth-provider`` (the in-tree gcp, azure and oidc providers) and basic
authentication are refused with one line naming the exec plugin to use instead.

Written kubeconfigs (:func:`render`, :func:`write`) name the certificate files by absolute
path (they live in the lab's ``pki/``), so ``kubectl --kubeconfig <lab>/kubeconfig`` works
and nothing secret is copied around.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from kubernetes import client as k8s
from kubernetes.config import ConfigException, load_incluster_config
from kubernetes.config.kube_config import KubeConfigLoader

from ..errors import KubeconfigError
from . import execcredential


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
    tls_server_name: str | None = None
    #: the kubeconfig's ``proxy-url``; without it, ``HTTPS_PROXY``/``NO_PROXY`` as in kubectl
    proxy: str | None = None
    #: the package's hook that re-reads a rotating token (in-cluster ServiceAccount tokens)
    refresh: Callable[[k8s.Configuration], None] | None = None

    def configuration(self) -> k8s.Configuration:
        """A fresh ``kubernetes.client.Configuration`` for one ``ApiClient``."""
        # a loopback API server's traffic never goes to a proxy (HTTPS_PROXY in CI...)
        proxy = self.proxy if self.proxy or not _is_loopback(self.server) else ""
        cfg = k8s.Configuration(host=self.server, proxy=proxy,
                                connection_pool_maxsize=POOL_SIZE)  # fmt: skip
        cfg.ssl_ca_cert = self.ca_file
        cfg.cert_file, cfg.key_file = self.cert_file, self.key_file
        cfg.verify_ssl = not self.insecure
        cfg.tls_server_name = self.tls_server_name
        cfg.retries = False  # no silent retries: callers decide what to retry
        if self.token:
            cfg.api_key["BearerToken"] = f"Bearer {self.token}"
        cfg.refresh_api_key_hook = self.refresh  # type: ignore[assignment]  # the client leaves it unannotated, None
        return cfg


#: connections kept open per API server and client: every thread of the node agent has
#: its own client, so a few are plenty (as requests' default of 10)
POOL_SIZE = 10


def _is_loopback(server: str) -> bool:
    host = urlsplit(server).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


#: user fields gpu-lab handles itself (exec) or refuses (auth-provider, basic auth): the
#: package's loader never sees them, so it neither runs a plugin at load time nor logs
_OWN_USER_FIELDS = ("exec", "auth-provider", "username", "password")
_FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def _for_loader(doc: dict, ctx_name: str, cluster: dict, user: dict) -> dict:
    """The one context ``ctx_name`` for ``KubeConfigLoader`` (``~`` expanded in paths)."""
    ctx = next(c for c in doc["contexts"] if isinstance(c, dict) and c.get("name") == ctx_name)

    def expand(obj: dict) -> dict:
        return {k: str(Path(v).expanduser()) if k in _FILE_FIELDS and isinstance(v, str) else v
                for k, v in obj.items()}

    users = []
    if ctx["context"].get("user"):
        kept = {k: v for k, v in user.items() if k not in _OWN_USER_FIELDS}
        users = [{"name": ctx["context"]["user"], "user": expand(kept)}]
    return {
        "contexts": [ctx],
        "clusters": [{"name": ctx["context"].get("cluster"), "cluster": expand(cluster)}],
        "users": users,
        "current-context": ctx_name,
    }


def load(path: Path | str, context: str | None = None) -> Credentials:
    """The server and credentials of ``context`` (default: current-context) in a kubeconfig."""
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
    loaded = k8s.Configuration()
    try:
        KubeConfigLoader(
            _for_loader(doc, ctx_name, cluster, user), ctx_name, config_base_path=str(base)
        ).load_and_set(loaded)
    except (ConfigException, OSError) as exc:
        raise KubeconfigError(f"{source}: {exc}") from None
    bearer = loaded.api_key.get("BearerToken") or ""
    return Credentials(
        server=loaded.host,
        ca_file=loaded.ssl_ca_cert,
        cert_file=loaded.cert_file,
        key_file=loaded.key_file,
        token=bearer.split(" ", 1)[-1].strip() or None,
        insecure=not loaded.verify_ssl,
        context=ctx_name,
        exec=plugin,
        tls_server_name=loaded.tls_server_name,
        proxy=cluster.get("proxy-url"),
    )


def in_cluster() -> Credentials:
    """A pod's own ServiceAccount (``KUBERNETES_SERVICE_HOST``, the mounted token and CA),
    through ``kubernetes.config.load_incluster_config``; the token is re-read as the
    kubelet rotates it."""
    loaded = k8s.Configuration()
    try:
        load_incluster_config(client_configuration=loaded)
    except ConfigException as exc:
        raise KubeconfigError(f"not running in a pod with a ServiceAccount: {exc}") from None
    bearer = loaded.api_key.get("BearerToken") or ""
    return Credentials(
        server=loaded.host,
        ca_file=loaded.ssl_ca_cert,
        token=bearer.split(" ", 1)[-1].strip() or None,
        context="in-cluster",
        refresh=loaded.refresh_api_key_hook,
    )
