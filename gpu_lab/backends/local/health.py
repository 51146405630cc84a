"""Health checks of the control plane's components, over TLS with the lab's own CA.

etcd answers ``/health`` (JSON), kube-apiserver ``/readyz`` (with the admin's client
certificate), the controller-manager and scheduler ``/healthz``.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl

from .certs import Pki
from .components import APISERVER, ETCD, HOST

HEALTH_TIMEOUT_S = 2.0
_PATHS = {ETCD: "/health", APISERVER: "/readyz"}
#: the client certificate each health endpoint needs (the others allow anonymous probes)
_CLIENTS = {ETCD: "apiserver-etcd-client", APISERVER: "admin"}


def health_path(component: str) -> str:
    return _PATHS.get(component, "/healthz")


def health_url(component: str, port: int | None) -> str | None:
    return f"https://{HOST}:{port}{health_path(component)}" if port else None


class HealthProbe:
    """Probes one lab's components; TLS contexts are kept until the lab's CA changes."""

    def __init__(self, pki: Pki):
        self.pki = pki
        self._ssl: dict[tuple[str | None, int], ssl.SSLContext] = {}

    def clear(self) -> None:
        """Forget the TLS contexts (the lab's certificates were just made or renewed)."""
        self._ssl.clear()

    def context(self, client: str | None) -> ssl.SSLContext:
        # keyed by the CA file's mtime: another process may have remade the lab meanwhile
        key = (client, self.pki.ca_crt.stat().st_mtime_ns)
        ctx = self._ssl.get(key)
        if ctx is None:
            ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
            if client:
                ctx.load_cert_chain(str(self.pki.crt(client)), str(self.pki.key(client)))
            self._ssl[key] = ctx
        return ctx

    def get(
        self, port: int, path: str, client: str | None, timeout: float = HEALTH_TIMEOUT_S
    ) -> tuple[int, str]:
        conn = http.client.HTTPSConnection(HOST, port, context=self.context(client),
                                           timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read(4096).decode(errors="replace")
        finally:
            conn.close()

    def check(self, component: str, state: dict) -> tuple[bool, str]:
        """Whether ``component`` answers its health endpoint; the reason when not."""
        port = state["ports"].get(component)
        if not port:
            return False, "no port recorded"
        path = health_path(component)
        try:
            code, body = self.get(port, path, _CLIENTS.get(component))
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            return False, f"{path}: {exc.__class__.__name__}: {exc}"
        if component == ETCD:
            try:
                ok = code == 200 and json.loads(body).get("health") == "true"
            except ValueError:
                ok = False
        else:
            ok = code == 200 and body.strip() == "ok"
        return ok, "" if ok else f"{path}: HTTP {code}: {body.strip()[:200]}"


def listening(port: int, host: str = HOST) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


__all__ = ["HEALTH_TIMEOUT_S", "HealthProbe", "health_path", "health_url", "listening"]
