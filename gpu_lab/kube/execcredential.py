"""Exec credential plugins: how EKS, GKE and AKS kubeconfigs authenticate.

A kubeconfig user with ``exec:`` names a command (``aws eks get-token``,
``gke-gcloud-auth-plugin``, ``kubelogin get-token``) that prints an ``ExecCredential``
(``client.authentication.k8s.io/v1`` or ``v1beta1``) with a bearer token or a client
certificate. This module runs it the way client-go does (its ``plugin/pkg/client/auth/exec``
and https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins):

* the request goes in ``KUBERNETES_EXEC_INFO``: ``{"apiVersion", "kind": "ExecCredential",
  "spec": {"interactive": false}}``, plus ``spec.cluster`` (server, CA bytes, TLS options and
  the cluster's ``client.authentication.k8s.io/exec`` extension as ``config``) when the
  kubeconfig sets ``provideClusterInfo: true``; ``env`` entries are added to our environment;
* the answer is cached until ``status.expirationTimestamp`` (for the process when absent),
  run again once it has passed, and once more when the API server answers 401 (unless
  another request already rotated it);
* errors are one line in client-go's words (``exec: executable aws not found`` with the
  kubeconfig's ``installHint``, ``exec plugin: invalid apiVersion ...``, ``exec plugin didn't
  return a status field``...); a plugin that fails adds its own stderr.

gpu-lab never has a terminal to lend a plugin (it runs in notebooks, CI and daemons), so
the plugin's stdin is closed and ``spec.interactive`` is false; ``interactiveMode: Always``
is refused when the kubeconfig is read rather than when a login prompt would hang.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..errors import ExecCredentialError
from .pemfiles import materialise

#: the versions client-go still accepts (v1alpha1 went in Kubernetes 1.24)
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
#: the cluster extension whose value a plugin gets as spec.cluster.config
CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"
DOCS = (
    "https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins"
)
#: kubectl waits for a plugin forever; gpu-lab never hangs, but a cloud CLI may take a while
DEFAULT_TIMEOUT_S = 120.0
_STDERR_CHARS = 400


@dataclass(frozen=True)
class ExecConfig:
    """A kubeconfig user's ``exec:`` stanza, validated as kubectl validates it."""

    user: str
    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: str = "IfAvailable"


def parse_config(raw: object, user: str, base: Path) -> ExecConfig:
    """``users[].user.exec`` of the user named ``user``; ``base`` is the kubeconfig's folder
    (a command with a slash in it is relative to it, as in kubectl; a bare name is looked
    up on ``PATH``)."""
    if not isinstance(raw, dict):
        raise ExecCredentialError(f"invalid configuration: exec of user {user!r} is not a mapping")
    errors: list[str] = []
    command = str(raw.get("command") or "")
    api_version = str(raw.get("apiVersion") or "")
    if not command:
        errors.append(f"command must be specified for {user} to use exec authentication plugin")
    if not api_version:
        errors.append(f"apiVersion must be specified for {user} to use exec authentication plugin")
    env: list[tuple[str, str]] = []
    for item in raw.get("env") or []:
        name = (item or {}).get("name") if isinstance(item, dict) else None
        if not name:
            errors.append(
                f"env variable name must be specified for {user} to use exec authentication plugin"
            )
            continue
        env.append((str(name), str(item.get("value") or "")))
    mode = raw.get("interactiveMode") or ""
    if not mode and api_version != API_VERSIONS[0]:
        mode = "IfAvailable"  # kubeconfig v1's default for v1beta1; v1 has none
    if not mode:
        errors.append(
            f"interactiveMode must be specified for {user} to use exec authentication plugin"
        )
    elif mode not in INTERACTIVE_MODES:
        errors.append(f'invalid interactiveMode for {user}: "{mode}"')
    if errors:
        joined = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ExecCredentialError(f"invalid configuration: {joined}")
    if api_version not in API_VERSIONS:
        raise ExecCredentialError(f'exec plugin: invalid apiVersion "{api_version}"')
    if mode == "Always":
        raise ExecCredentialError(
            f"exec plugin cannot support interactive mode: user {user!r} sets interactiveMode: "
            "Always, and gpu-lab runs credential plugins without a terminal; log in with the "
            "plugin in a shell first and set interactiveMode: IfAvailable or Never"
        )
    if os.sep in command:
        command = str((base / Path(command).expanduser()).resolve())
    args = raw.get("args") or []
    return ExecConfig(
        user=user,
        command=command,
        api_version=api_version,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        install_hint=" ".join(str(raw.get("installHint") or "").split()),
        provide_cluster_info=bool(raw.get("provideClusterInfo")),
        interactive_mode=mode,
    )


def cluster_info(cluster: dict, base: Path) -> dict:
    """``spec.cluster`` for a plugin with ``provideClusterInfo``: the kubeconfig cluster with
    the CA always as bytes (base64 in JSON) and the exec extension as ``config``."""
    info: dict = {"server": cluster.get("server", "")}
    if cluster.get("tls-server-name"):
        info["tls-server-name"] = cluster["tls-server-name"]
    if cluster.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    ca = cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        path = Path(cluster["certificate-authority"]).expanduser()
        try:
            ca = base64.b64encode((base / path).read_bytes()).decode()
        except OSError as exc:
            raise ExecCredentialError(
                f"unable to read certificate-authority {path}: {exc.strerror}"
            ) from exc
    if ca:
        info["certificate-authority-data"] = ca
    if cluster.get("proxy-url"):
        info["proxy-url"] = cluster["proxy-url"]
    if cluster.get("disable-compression"):
        info["disable-compression"] = True
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == CLUSTER_EXTENSION:
            info["config"] = ext.get("extension")
    return info


@dataclass(frozen=True)
class ExecResult:
    """What one run of the plugin gave: a token and/or a client certificate (as files)."""

    token: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    expires_at: float | None = None  # Unix time; None: until the process ends or a 401


def parse_timestamp(value: str) -> float:
    """An RFC 3339 time (``2026-12-01T10:00:00Z``, fractions and offsets allowed)."""
    try:
        stamp = datetime.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise ExecCredentialError(
            f"decoding stdout: parsing time {json.dumps(value)} as RFC 3339: invalid"
        ) from exc
    if stamp.tzinfo is None:
        raise ExecCredentialError(
            f"decoding stdout: parsing time {json.dumps(value)} as RFC 3339: no time zone"
        )
    return stamp.timestamp()


def decode(stdout: bytes, api_version: str) -> dict:
    """The ``status`` of an ExecCredential the plugin printed, checked as client-go checks it."""
    try:
        doc = json.loads(stdout)
    except ValueError as exc:
        raise ExecCredentialError(
            f"decoding stdout: couldn't get version/kind; json parse error: {exc}"
        ) from exc
    if not isinstance(doc, dict):
        raise ExecCredentialError("decoding stdout: couldn't get version/kind; not a JSON object")
    got = doc.get("apiVersion") or ""
    if got != api_version:
        raise ExecCredentialError(
            f"exec plugin is configured to use API version {api_version}, "
            f"plugin returned version {got}"
        )
    if doc.get("kind") != "ExecCredential":
        raise ExecCredentialError(
            f'decoding stdout: no kind "{doc.get("kind") or ""}" is registered for version '
            f'"{api_version}"'
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ExecCredentialError("exec plugin didn't return a status field")
    token = status.get("token") or ""
    cert = status.get("clientCertificateData") or ""
    key = status.get("clientKeyData") or ""
    if not (token or cert or key):
        raise ExecCredentialError("exec plugin didn't return a token or cert/key pair")
    if bool(cert) != bool(key):
        raise ExecCredentialError("exec plugin returned only certificate or key, not both")
    return status


def _one_line(text: str) -> str:
    # a plugin's stderr is often a few lines (the error, then what to run): keep them all
    flat = "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return flat if len(flat) <= _STDERR_CHARS else flat[: _STDERR_CHARS - 3] + "..."


class ExecPlugin:
    """Runs one exec credential plugin and caches its answer (thread-safe; one run at a
    time, as a plugin may be slow and rate-limited)."""

    def __init__(
        self,
        config: ExecConfig,
        cluster: dict | None = None,
        *,
        clock: Callable[[], float] = time.time,
        timeout: float = DEFAULT_TIMEOUT_S,
        write_pem: Callable[[bytes, str], str] | None = None,
    ):
        self.config = config
        self.cluster = cluster
        self.clock = clock
        self.timeout = timeout
        self.runs = 0  # how many times the plugin ran (tests and diagnostics read it)
        self._write_pem = write_pem or materialise
        self._lock = threading.Lock()
        self._cached: ExecResult | None = None

    def __repr__(self) -> str:
        return f"ExecPlugin({self.config.command!r}, user={self.config.user!r})"

    def credential(self) -> ExecResult:
        """The cached credential, or a fresh one when there is none or it has expired."""
        with self._lock:
            cached = self._cached
            if cached is not None and not self._expired(cached):
                return cached
            return self._run()

    def refresh(self, rejected: ExecResult) -> ExecResult:
        """After a 401 with ``rejected``: run the plugin again, unless another request has
        already replaced that credential (then use the newer one)."""
        with self._lock:
            if self._cached is not None and self._cached is not rejected:
                return self._cached
            return self._run()

    def _expired(self, cred: ExecResult) -> bool:
        return cred.expires_at is not None and self.clock() > cred.expires_at

    def request(self) -> dict:
        """The ExecCredential the plugin gets in ``KUBERNETES_EXEC_INFO``."""
        spec: dict = {"interactive": False}
        if self.config.provide_cluster_info and self.cluster is not None:
            spec["cluster"] = self.cluster
        return {"kind": "ExecCredential", "apiVersion": self.config.api_version, "spec": spec}

    def _run(self) -> ExecResult:
        cfg = self.config
        env = {**os.environ, **dict(cfg.env), EXEC_INFO_ENV: json.dumps(self.request())}
        self.runs += 1
        try:
            done = subprocess.run(
                [cfg.command, *cfg.args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            hint = cfg.install_hint or f"see {DOCS}"
            raise ExecCredentialError(
                f"getting credentials: exec: executable {cfg.command} not found (it looks like "
                f"you are trying to use a client-go credential plugin that is not installed): "
                f"{hint}"
            ) from exc
        except PermissionError as exc:
            raise ExecCredentialError(
                f"getting credentials: exec: fork/exec {cfg.command}: permission denied"
            ) from exc
        except OSError as exc:
            raise ExecCredentialError(
                f"getting credentials: exec: {cfg.command}: {exc.strerror or exc}"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise ExecCredentialError(
                f"getting credentials: exec: executable {cfg.command} did not finish in "
                f"{self.timeout:g} s"
            ) from exc
        if done.returncode != 0:
            msg = (f"getting credentials: exec: executable {cfg.command} failed with exit "
                   f"code {done.returncode}")
            err = _one_line(done.stderr.decode(errors="replace"))
            raise ExecCredentialError(f"{msg}: {err}" if err else msg)
        try:
            status = decode(done.stdout, cfg.api_version)
        except ExecCredentialError as exc:
            raise ExecCredentialError(f"getting credentials: {exc}") from None
        expires = status.get("expirationTimestamp")
        try:
            expires_at = parse_timestamp(expires) if expires else None
        except ExecCredentialError as exc:
            raise ExecCredentialError(f"getting credentials: {exc}") from None
        cert_file = key_file = None
        if status.get("clientCertificateData"):
            cert_file = self._write_pem(status["clientCertificateData"].encode(), ".crt")
            key_file = self._write_pem(status["clientKeyData"].encode(), ".key")
            _check_pair(cert_file, key_file)
        self._cached = ExecResult(
            token=status.get("token") or None,
            cert_file=cert_file,
            key_file=key_file,
            expires_at=expires_at,
        )
        return self._cached


def _check_pair(cert_file: str, key_file: str) -> None:
    # client-go parses the pair at once (tls.X509KeyPair): a bad one is the plugin's fault,
    # and should not surface later as a TLS handshake error of some request
    try:
        ssl.create_default_context().load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        raise ExecCredentialError(
            f"getting credentials: failed parsing client key/certificate: "
            f"{exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc}"
        ) from None


@dataclass
class _Registry:
    """One :class:`ExecPlugin` per (config, cluster), like client-go's cache: every client
    opened on the same kubeconfig user shares the plugin's answer."""

    plugins: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, config: ExecConfig, cluster: dict | None) -> ExecPlugin:
        key = (config, json.dumps(cluster, sort_keys=True, default=str))
        with self.lock:
            plugin = self.plugins.get(key)
            if plugin is None:
                plugin = self.plugins[key] = ExecPlugin(config, cluster)
            return plugin


_REGISTRY = _Registry()


def plugin_for(config: ExecConfig, cluster: dict | None) -> ExecPlugin:
    """The shared runner of ``config`` for ``cluster`` (``spec.cluster``, or None)."""
    return _REGISTRY.get(config, cluster)
