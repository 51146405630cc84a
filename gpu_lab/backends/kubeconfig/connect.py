"""Reaching an existing cluster: which kubeconfig (as kubectl picks it) and a client for one
of its contexts. The session and the read-only inventory both start here."""

from __future__ import annotations

import os
from pathlib import Path

from ...kube import KubeClient


def default_kubeconfig() -> Path:
    """``$KUBECONFIG`` (its first entry) or ``~/.kube/config``, as kubectl looks."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), None)
    return Path(first or "~/.kube/config").expanduser()


def open_client(
    kubeconfig: Path | str | None = None, context: str | None = None, timeout: float = 30.0
) -> KubeClient:
    """A client for a kubeconfig's context. Client certificates, tokens and exec credential
    plugins (EKS, GKE, AKS) work; a credential gpu-lab cannot send (an ``auth-provider``,
    basic authentication) is refused with one line here, not as a later ``Unauthorized``."""
    path = Path(kubeconfig).expanduser() if kubeconfig else default_kubeconfig()
    return KubeClient.from_kubeconfig(path, context, timeout=timeout)
