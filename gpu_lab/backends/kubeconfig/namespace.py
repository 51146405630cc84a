"""gpu-lab's own namespace on an existing cluster: created on first use and labelled
``gpulab.dev/managed=true``; a namespace of that name without the label is someone else's and
refused; ``delete`` is all that ``reset`` removes."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import NamespaceRefused
from ...kube import KubeClient, NotFound
from . import MANAGED_LABEL

Wait = Callable[[Callable[[], bool], str], None]


class OwnNamespace:
    def __init__(self, client: KubeClient, name: str, wait: Wait):
        self.client, self.name, self.wait = client, name, wait

    def get(self) -> dict | None:
        try:
            return self.client.get("Namespace", self.name)
        except NotFound:
            return None

    def check_managed(self, ns: dict) -> None:
        if ((ns.get("metadata") or {}).get("labels") or {}).get(MANAGED_LABEL) != "true":
            raise NamespaceRefused(
                f'namespace "{self.name}" exists and was not created by gpu-lab (no label '
                f"{MANAGED_LABEL}=true); open the session with another namespace="
            )

    def ensure(self, labels: dict[str, str] | None = None) -> None:
        """The namespace there, ours, and its default ServiceAccount made (pods are refused
        until the ServiceAccount controller made it)."""
        ns = self.get()
        if ns is not None:
            self.check_managed(ns)
            if (ns.get("metadata") or {}).get("deletionTimestamp"):  # a reset still running
                self.wait(lambda: self.get() is None, f'namespace "{self.name}" to finish terminating')
                ns = None
        if ns is None:
            self.client.create({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": self.name,
                    "labels": {**(labels or {}), MANAGED_LABEL: "true",
                               "app.kubernetes.io/managed-by": "gpu-lab"},
                },
            })

        def has_sa() -> bool:
            try:
                self.client.get("ServiceAccount", "default", namespace=self.name)
                return True
            except NotFound:
                return False

        self.wait(has_sa, f'the default ServiceAccount of namespace "{self.name}"')

    def pods(self) -> list[dict]:
        try:
            return self.client.list("Pod", namespace=self.name)["items"]
        except NotFound:
            return []

    def delete(self, force: bool, wait: bool, pods: Callable[[], list[dict]]) -> None:
        """Delete the namespace if it is ours; ``force``: its pods at once too (``pods()``
        lists them); ``wait``: until it is gone."""
        ns = self.get()
        if ns is None:
            return
        self.check_managed(ns)
        if not (ns.get("metadata") or {}).get("deletionTimestamp"):
            self.client.delete("Namespace", self.name, missing_ok=True)

        def gone() -> bool:
            if force:
                for p in pods():
                    self.client.delete("Pod", p["metadata"]["name"], namespace=self.name,
                                       grace_period_seconds=0, missing_ok=True)
            return self.get() is None

        if wait:
            self.wait(gone, f'namespace "{self.name}" to be deleted')
        elif force:
            gone()
