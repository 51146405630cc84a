"""A kubectl command line, read the way kubectl reads the part of it gpu-lab serves.

The sim renders ``get pods``, ``get nodes``, ``get events`` and ``describe node NAME``
itself (``render.py``); the real backends run kubectl, read-only verbs only (``real.py``).
Anything else is one line that says what is served.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ...errors import GpuLabError

#: what the sim renders, as its one line of help says
SIM_SERVED = ("get pods [-o wide] [-A | -n NAMESPACE], get nodes [-o wide] [-L LABEL]..., "
              "get events [-A | -n NAMESPACE], describe node NAME")
RESOURCES = {"pods": "pods", "pod": "pods", "po": "pods", "nodes": "nodes", "node": "nodes",
             "no": "nodes", "events": "events", "event": "events", "ev": "events"}
#: verbs the real backends run: none of them changes the cluster (change it with the Session's calls)
READ_ONLY_VERBS = ("get", "describe", "events", "explain", "api-resources", "api-versions", "version",
                   "logs", "top", "auth")
#: flags the lab sets itself, or that never return
REFUSED_FLAGS = ("--kubeconfig", "--context", "--cluster", "--user", "--server", "-s", "--token",
                 "--as", "--as-group", "-w", "--watch", "--watch-only", "-f", "--follow")


@dataclass
class Command:
    verb: str
    resource: str = ""
    names: list[str] = field(default_factory=list)
    wide: bool = False
    all_namespaces: bool = False
    namespace: str | None = None
    labels: list[str] = field(default_factory=list)  # -L columns


def split(command: str) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        raise GpuLabError('kubectl: give the command as one string, e.g. lab.kubectl("get pods -o wide")')
    try:
        argv = shlex.split(command)
    except ValueError as err:
        raise GpuLabError(f"kubectl: cannot read {command!r}: {err}") from None
    return argv[1:] if argv[0] == "kubectl" else argv


def check_read_only(argv: list[str]) -> list[str]:
    """The real backends' rule: a read-only verb, and none of the flags the lab sets itself."""
    if not argv or argv[0] not in READ_ONLY_VERBS:
        raise GpuLabError(f"kubectl {argv[0] if argv else ''}: gpu-lab runs read-only kubectl commands "
                          f"({', '.join(READ_ONLY_VERBS)}); change the cluster with the Session's "
                          "calls (apply, delete, cordon, label_node)")
    for a in argv:
        if a.split("=", 1)[0] in REFUSED_FLAGS:
            raise GpuLabError(f"kubectl: {a.split('=', 1)[0]} is not taken here: the lab sets the "
                              "kubeconfig and context, and a watch or follow would never return")
    return argv


def _unsupported(what: str) -> GpuLabError:
    return GpuLabError(f"kubectl on the sim: {what} is not rendered; it renders {SIM_SERVED}")


def parse_sim(command: str) -> Command:
    """The command as the sim serves it, or one line naming what it serves."""
    argv = split(command)
    positional: list[str] = []
    cmd = Command("")
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, value = a.partition("=")
        if a[:2] in ("-o", "-n", "-L") and len(a) > 2 and not eq:  # -owide, -nNS: pflag's short form
            flag, eq, value = a[:2], "=", a[2:]
        takes = flag in ("-o", "--output", "-n", "--namespace", "-L", "--label-columns")
        if takes and not eq:
            if i + 1 >= len(argv):
                raise GpuLabError(f"kubectl: flag needs an argument: {flag}")
            value, i = argv[i + 1], i + 1
        if flag in ("-o", "--output"):
            if value != "wide":
                raise _unsupported(f"-o {value}")
            cmd.wide = True
        elif flag in ("-n", "--namespace"):
            cmd.namespace = value
        elif flag in ("-L", "--label-columns"):
            cmd.labels += [v for v in value.split(",") if v]
        elif a in ("-A", "--all-namespaces"):
            cmd.all_namespaces = True
        elif a.startswith("-") and a != "-":
            raise _unsupported(f"the flag {flag}")
        else:
            positional.append(a)
        i += 1
    if not positional:
        raise _unsupported("an empty command")
    cmd.verb, rest = positional[0], positional[1:]
    if cmd.verb not in ("get", "describe"):
        raise _unsupported(f'"{cmd.verb}"')
    if not rest:
        raise GpuLabError(f"kubectl {cmd.verb}: name a resource type; the sim renders {SIM_SERVED}")
    kind, _, name = rest[0].partition("/")
    cmd.resource = RESOURCES.get(kind, "")
    cmd.names = [name] if name else rest[1:]
    served = {"get": ("pods", "nodes", "events"), "describe": ("nodes",)}[cmd.verb]
    if cmd.resource not in served:
        raise _unsupported(f'"{cmd.verb} {kind}"')
    if cmd.verb == "describe" and len(cmd.names) != 1:
        raise _unsupported("describe node without exactly one NAME")
    if cmd.verb == "get" and cmd.names:
        raise _unsupported(f'"get {kind}" with names')
    if cmd.labels and cmd.resource != "nodes":
        raise _unsupported(f"-L on {cmd.resource}")
    if cmd.wide and cmd.resource == "events":
        raise _unsupported("get events -o wide")
    return cmd
