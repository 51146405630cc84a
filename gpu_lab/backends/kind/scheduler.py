"""kubeadm's kube-scheduler on a kind cluster, read back for explain's score tables.

The kind config gives the scheduler the local control plane's ``--vmodule`` (``config.py``),
so it logs every score plugin's weighted score for every node (``local/schedulerlog.py``
parses those lines for both backends). Here, two things are read from the running cluster:

* its log, through the API server (the static pod's ``log`` subresource, what ``kubectl logs``
  shows). Each read asks only for what came since the previous one: the kubelet prefixes
  every line with a fixed-width timestamp (``timestamps=true``) and takes ``sinceTime`` to the
  second, so the lines of that second already read are dropped by timestamp and count. Lines
  are kept for the session's life: a scheduler restart begins a new log and the old lines
  stay read.
* the score weights: the running scheduler's own completed configuration from its
  ``/configz`` (the v1 KubeSchedulerConfiguration after defaulting, every profile's plugins
  with their weights). Asking the process that scores is simpler and more honest than
  recomputing: kubeadm runs it without a configuration file, from flags a second run would
  have to copy. kubeadm binds its secure port to 127.0.0.1 of the control-plane node, so the
  request runs there (``docker exec``) with kubeadm's admin credentials; the scheduler's
  serving certificate is self-signed (kubeadm gives it none), hence no TLS verification on
  that loopback hop.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from ...errors import KindError
from ...kube import KubeClient
from ..local import schedulerlog

NAMESPACE = "kube-system"
#: the label kubeadm's static pod carries
SELECTOR = "component=kube-scheduler"
#: kubeadm's admin kubeconfig and the scheduler's secure port (127.0.0.1 only)
ADMIN_CONF = "/etc/kubernetes/admin.conf"
SECURE_PORT = 10259
CONFIGZ_TIMEOUT_S = 60


def split_timestamp(line: str) -> tuple[str, str]:
    """``(timestamp, text)`` of a line read with ``timestamps=true``."""
    stamp, _, text = line.partition(" ")
    return stamp, text


class SchedulerLog:
    """kube-scheduler's log on a kind cluster, read incrementally through the API server."""

    def __init__(self, client: KubeClient):
        self.client = client
        self.lines: list[str] = []
        self._pod: str | None = None
        self._last = ""  # timestamp of the last line read
        self._at_last = 0  # how many lines read carry that timestamp
        self._parsed: tuple[int, dict[str, schedulerlog.Attempt]] = (0, {})

    def pod(self) -> str:
        if self._pod is None:
            pods = self.client.list("Pod", namespace=NAMESPACE, label_selector=SELECTOR)["items"]
            if not pods:
                raise KindError(f"no kube-scheduler pod in {NAMESPACE} (label {SELECTOR})")
            self._pod = pods[0]["metadata"]["name"]
        return self._pod

    def _fetch(self) -> str:
        params: dict[str, Any] = {"timestamps": "true"}
        if self._last:
            # whole seconds (RFC 3339): ``2026-12-01T18:31:06`` + the zone after the nanoseconds
            head, _, frac = self._last.partition(".")
            params["sinceTime"] = head + frac[9:]
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{self.pod()}/log"
        return self.client.request("GET", path, params=params).data.decode(errors="replace")

    def refresh(self) -> list[str]:
        """Read what the scheduler logged since the last call; every line read so far."""
        last, count, seen = self._last, self._at_last, 0
        for raw in self._fetch().splitlines():
            stamp, text = split_timestamp(raw)
            if not stamp or stamp < last:  # fixed width, one zone: text order is time order
                continue
            if stamp == last:
                seen += 1
                if seen <= count:  # read last time
                    continue
            self.lines.append(text)
            if stamp == self._last:
                self._at_last += 1
            else:
                self._last, self._at_last = stamp, 1
        return self.lines

    def history(self, since: int = 0) -> list[schedulerlog.Attempt]:
        """The attempts logged from line ``since`` (a ``mark``) on, oldest first."""
        return schedulerlog.history(self.refresh()[since:])

    def attempts(self) -> dict[str, schedulerlog.Attempt]:
        """Each pod's latest attempt (parsed again only when lines came)."""
        lines = self.refresh()
        if self._parsed[0] != len(lines):
            self._parsed = (len(lines), schedulerlog.attempts(lines))
        return self._parsed[1]

    def mark(self) -> int:
        """Where the log is now, for ``history``."""
        return len(self.refresh())


def configz(control_plane: str) -> dict:
    """The running kube-scheduler's completed configuration (``/configz``'s
    ``componentconfig``: a v1 KubeSchedulerConfiguration), asked on the control-plane node."""
    argv = ["docker", "exec", control_plane, "kubectl", f"--kubeconfig={ADMIN_CONF}",
            f"--server=https://127.0.0.1:{SECURE_PORT}", "--insecure-skip-tls-verify=true",
            "get", "--raw", "/configz"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=CONFIGZ_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KindError(f"kube-scheduler's /configz on {control_plane} did not answer in "
                        f"{CONFIGZ_TIMEOUT_S} s") from None
    except OSError as exc:
        raise KindError(f"cannot run docker: {exc.strerror}") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise KindError(f"cannot read kube-scheduler's /configz on {control_plane}: {last}")
    try:
        config = json.loads(res.stdout)["componentconfig"]
    except (ValueError, KeyError, TypeError):
        raise KindError(f"kube-scheduler's /configz on {control_plane} is not a "
                        "KubeSchedulerConfiguration") from None
    if not isinstance(config, dict):
        raise KindError(f"kube-scheduler's /configz on {control_plane} is not a "
                        "KubeSchedulerConfiguration")
    return config
