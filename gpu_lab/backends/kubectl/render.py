"""``Session.kubectl`` on the sim: the command read (``command.py``), the session's state
read as API objects (``fromsim.py``), and the text kubectl would print (``gettable.py``,
``describe.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .command import parse_sim
from .describe import describe_node
from .fromsim import sim_view
from .gettable import get_events, get_nodes, get_pods
from .output import KubectlOutput

if TYPE_CHECKING:
    from ..sim import SimSession

DEFAULT_NAMESPACE = "default"


def sim_kubectl(session: SimSession, command: str) -> KubectlOutput:
    cmd = parse_sim(command)
    view = sim_view(session)
    namespace = cmd.namespace or DEFAULT_NAMESPACE
    if cmd.verb == "describe":
        name = cmd.names[0]
        node = next((n for n in view.nodes if n.name == name), None)
        if node is None:
            return KubectlOutput(command, f'Error from server (NotFound): nodes "{name}" not found', 1)
        return KubectlOutput(command, describe_node(node, view))
    if cmd.resource == "pods":
        text = get_pods(cmd, view, namespace)
    elif cmd.resource == "nodes":
        text = get_nodes(cmd, view)
    else:
        text = get_events(cmd, view, namespace)
    return KubectlOutput(command, text)
