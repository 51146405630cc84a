"""``kubectl get pods | nodes | events`` on the sim: the columns of kubectl's printers
(``pkg/printers/internalversion/printers.go``: printPod, printNode, printEvent), in the
order the API server lists objects (by namespace, then name), laid out by its tabwriter."""

from __future__ import annotations

from .command import Command
from .tabwriter import GET, tabulate
from .view import KEvent, KNode, KPod, View

POD_COLUMNS = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
POD_WIDE = ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
NODE_COLUMNS = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
NODE_WIDE = ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
EVENT_COLUMNS = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
ROLE_PREFIX = "node-role.kubernetes.io/"


def _table(header: list[str], rows: list[list[str]]) -> str:
    return tabulate("\n".join("\t".join(r) for r in [header, *rows]), *GET)


def _none_found(cmd: Command, namespace: str) -> str:
    if cmd.all_namespaces or cmd.resource == "nodes":
        return "No resources found"
    return f"No resources found in {namespace} namespace."


def pod_status(p: KPod) -> str:
    """printPod's STATUS: the phase, or the reason kubectl puts in its place."""
    if p.phase == "Pending" and p.reason == "SchedulingGated":
        return "SchedulingGated"
    if p.phase == "Succeeded":
        return "Completed"
    if p.phase == "Failed":
        return p.reason or "Error"
    return p.phase


def get_pods(cmd: Command, view: View, namespace: str) -> str:
    pods = [p for p in view.pods if cmd.all_namespaces or p.namespace == namespace]
    if not pods:
        return _none_found(cmd, namespace)
    rows = []
    for p in sorted(pods, key=lambda p: (p.namespace, p.name)):
        ready = p.containers if p.phase == "Running" else 0
        row = [p.name, f"{ready}/{p.containers}", pod_status(p), "0", view.age(p.created)]
        if cmd.wide:
            row += ["<none>", p.node or "<none>", p.nominated or "<none>", "<none>"]
        rows.append([p.namespace, *row] if cmd.all_namespaces else row)
    header = POD_COLUMNS + (POD_WIDE if cmd.wide else [])
    return _table(["NAMESPACE", *header] if cmd.all_namespaces else header, rows)


def roles(node: KNode) -> str:
    """findNodeRoles: node-role.kubernetes.io/ROLE and kubernetes.io/role, sorted."""
    found = {k[len(ROLE_PREFIX):] for k in node.labels if k.startswith(ROLE_PREFIX)}
    if node.labels.get("kubernetes.io/role"):
        found.add(node.labels["kubernetes.io/role"])
    return ",".join(sorted(r for r in found if r)) or "<none>"


def label_header(label: str) -> str:
    """kubectl's -L column: the label key's last path segment, upper-cased."""
    return label.split("/")[-1].upper()


def get_nodes(cmd: Command, view: View) -> str:
    if not view.nodes:
        return "No resources found"
    rows = []
    for n in sorted(view.nodes, key=lambda n: n.name):
        status = "Ready" + (",SchedulingDisabled" if n.unschedulable else "")
        row = [n.name, status, roles(n), view.age(n.created), n.info.get("kubeletVersion", "")]
        if cmd.wide:
            ips = dict(n.addresses)
            kernel = n.info.get("kernelVersion") or "<unknown>"
            if n.info.get("architecture"):
                kernel += f" ({n.info['architecture']})"
            row += [ips.get("InternalIP", "<none>"), ips.get("ExternalIP", "<none>"),
                    n.info.get("osImage") or "<unknown>", kernel,
                    n.info.get("containerRuntimeVersion") or "<unknown>"]
        row += [n.labels.get(label, "") for label in cmd.labels]
        rows.append(row)
    header = NODE_COLUMNS + (NODE_WIDE if cmd.wide else []) + [label_header(x) for x in cmd.labels]
    return _table(header, rows)


def event_name(e: KEvent, epoch: float) -> str:
    """The Event object's name (client-go: ``<object>.<first seen, unix ns, hex>``): the
    order the API server lists Events in, which ``kubectl get events`` keeps."""
    return f"{e.name}.{int((epoch + e.first) * 1e9):x}"


def get_events(cmd: Command, view: View, namespace: str) -> str:
    events = [e for e in view.events if cmd.all_namespaces or e.namespace == namespace]
    if not events:
        return _none_found(cmd, namespace)
    events.sort(key=lambda e: (e.namespace, event_name(e, view.epoch)))
    rows = []
    for e in events:
        row = [view.age(e.last), e.type, e.reason, f"{e.kind.lower()}/{e.name}", e.message.strip()]
        rows.append([e.namespace, *row] if cmd.all_namespaces else row)
    return _table(["NAMESPACE", *EVENT_COLUMNS] if cmd.all_namespaces else EVENT_COLUMNS, rows)
