"""What the node agent takes from its Nodes on the API server: a Node deleted, or another
object under its name now, retires the node (no kubelet outlives its machine); a new
``nvidia.com/mig.config`` label queues a run of the node's MIG manager (``migmanager.py``)."""

from __future__ import annotations

from collections.abc import Callable

from ..model.nodepool import MIG_CONFIG_LABEL
from .node import AgentNode


class NodeWatch:
    """The handlers of the agent's Node list-and-watch."""

    def __init__(self, nodes: dict[str, AgentNode], retire: Callable[[AgentNode, str], object]):
        self.nodes, self.retire = nodes, retire

    def listed(self, items: list[dict]) -> None:
        uids = {n["metadata"]["name"]: n["metadata"].get("uid") for n in items}
        for sn in self.nodes.values():  # deleted while the watch was down
            if sn.uid is not None and uids.get(sn.name) != sn.uid:
                self.retire(sn, "its Node was deleted")
        for node in items:
            self.changed(node)

    def event(self, kind: str, node: dict) -> None:
        if kind == "DELETED":
            self.deleted(node)
        else:
            self.changed(node)

    def deleted(self, node: dict) -> None:
        meta = node.get("metadata") or {}
        sn = self.nodes.get(meta.get("name", ""))
        if sn is not None and sn.uid is not None and meta.get("uid") == sn.uid:
            self.retire(sn, "its Node was deleted")

    def changed(self, node: dict) -> None:
        meta = node.get("metadata") or {}
        sn = self.nodes.get(meta.get("name", ""))
        if sn is not None and sn.uid is not None and meta.get("uid") not in (None, sn.uid):
            self.retire(sn, "its Node is another object now (deleted and registered again)")
            return
        wanted = (meta.get("labels") or {}).get(MIG_CONFIG_LABEL)
        if sn is not None and wanted != sn.mig_seen:
            sn.mig_seen = wanted  # each new value taken up once; a removed label asks for nothing
            if wanted is not None:
                sn.queue.put(("mig", wanted, None))
