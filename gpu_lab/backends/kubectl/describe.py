"""``kubectl describe node NAME`` on the sim, written the way kubectl's ``NodeDescriber``
writes it (``k8s.io/kubectl/pkg/describe/describe.go``: describeNode, describeNodeResource,
DescribeEvents): the same lines, tabs and order through the same tabwriter, so the layout
(column widths, the empty column after Name, trailing spaces in Conditions) is kubectl's.

The figures are the session's: labels, taints, capacity and allocatable as the sim's
kubelet model reports them, the node's non-terminated pods with their requests and limits
(percentages of allocatable, truncated as kubectl's ``int64()``), and the node's Events.
"""

from __future__ import annotations

from ...kubelet.nodestatus import CONDITIONS
from ...model.quantity import format_quantity
from ...names import TERMINAL_PHASES
from .duration import rfc1123z
from .gettable import roles
from .tabwriter import DESCRIBE, tabulate
from .view import KEvent, KNode, KPod, View

STANDARD = ("cpu", "memory", "ephemeral-storage")  # IsStandardContainerResourceName, less hugepages
SYSTEM_INFO = (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
               ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
               ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
               ("Container Runtime Version", "containerRuntimeVersion"),
               ("Kubelet Version", "kubeletVersion"))


def _multiline(title: str, items: list[str]) -> list[str]:
    """printLabelsMultiline and its kin: the first item beside the title, the rest below it."""
    if not items:
        return [f"{title}:\t<none>"]
    return [f"{title}:\t{items[0]}", *(f"\t{i}" for i in items[1:])]


def _percent(used: int, of: int) -> int:
    return int(used / of * 100) if of else 0


def _q(resource: str, amount: int) -> str:
    return format_quantity(resource, amount)


def _pods_section(node: KNode, pods: list[KPod], view: View) -> list[str]:
    alloc = node.allocatable or node.capacity
    cpu, mem = alloc.get("cpu", 0), alloc.get("memory", 0)
    out = [f"Non-terminated Pods:\t({len(pods)} in total)",
           "  Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge",
           "  ---------\t----\t\t------------\t----------\t---------------\t-------------\t---"]
    for p in pods:
        rc, lc = p.requests.get("cpu", 0), p.limits.get("cpu", 0)
        rm, lm = p.requests.get("memory", 0), p.limits.get("memory", 0)
        out.append(f"  {p.namespace}\t{p.name}\t\t{_q('cpu', rc)} ({_percent(rc, cpu)}%)\t"
                   f"{_q('cpu', lc)} ({_percent(lc, cpu)}%)\t{_q('memory', rm)} ({_percent(rm, mem)}%)\t"
                   f"{_q('memory', lm)} ({_percent(lm, mem)}%)\t{view.age(p.created)}")
    reqs: dict[str, int] = {}
    limits: dict[str, int] = {}
    for p in pods:
        for total, values in ((reqs, p.requests), (limits, p.limits)):
            for k, v in values.items():
                total[k] = total.get(k, 0) + v
    out += ["Allocated resources:", "  (Total limits may be over 100 percent, i.e., overcommitted.)",
            "  Resource\tRequests\tLimits", "  --------\t--------\t------"]
    for r in ("cpu", "memory", "ephemeral-storage"):
        req, lim, of = reqs.get(r, 0), limits.get(r, 0), alloc.get(r, 0)
        out.append(f"  {r}\t{_q(r, req)} ({_percent(req, of)}%)\t{_q(r, lim)} ({_percent(lim, of)}%)")
    huge = sorted(r for r in alloc if r.startswith("hugepages-"))
    ext = sorted(r for r in alloc if r not in (*STANDARD, "pods") and r not in huge)
    for r in huge:
        req, lim, of = reqs.get(r, 0), limits.get(r, 0), alloc.get(r, 0)
        out.append(f"  {r}\t{_q(r, req)} ({_percent(req, of)}%)\t{_q(r, lim)} ({_percent(lim, of)}%)")
    for r in ext:
        out.append(f"  {r}\t{_q(r, reqs.get(r, 0))}\t{_q(r, limits.get(r, 0))}")
    return out


def _events(events: list[KEvent], view: View) -> str | None:
    """DescribeEvents: None for none (then one ``Events:\\t<none>`` line in the block above)."""
    if not events:
        return None
    lines = ["Events:", "  Type\tReason\tAge\tFrom\tMessage", "  ----\t------\t----\t----\t-------"]
    for e in sorted(events, key=lambda e: e.first):  # SortableEvents: by first seen
        age = view.age(e.first)
        if e.count > 1:
            age = f"{view.age(e.last)} (x{e.count} over {age})"
        lines.append(f"  {e.type}\t{e.reason}\t{age}\t{e.source}\t{e.message.strip()}")
    return tabulate("\n".join(lines), *DESCRIBE)


def describe_node(node: KNode, view: View) -> str:
    t0 = view.epoch
    lines = [f"Name:\t{node.name}", f"Roles:\t{roles(node)}"]
    lines += _multiline("Labels", [f"{k}={v}" for k, v in sorted(node.labels.items())])
    lines += _multiline("Annotations", [f"{k}: {v}" for k, v in sorted(node.annotations.items())])
    lines.append(f"CreationTimestamp:\t{rfc1123z(t0 + node.created)}")
    taints = sorted(node.taints, key=lambda t: f"{t.effect},{t.key}")
    lines += _multiline("Taints", [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                                   for t in taints])
    lines.append(f"Unschedulable:\t{str(node.unschedulable).lower()}")
    lines += ["Lease:", f"  HolderIdentity:\t{node.name}", "  AcquireTime:\t<unset>",
              f"  RenewTime:\t{rfc1123z(t0 + view.now)}"]
    lines += ["Conditions:", "  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage",
              "  ----\t------\t-----------------\t------------------\t------\t-------"]
    for kind, status, reason, message in CONDITIONS:
        lines.append(f"  {kind} \t{status} \t{rfc1123z(t0 + view.now)} \t{rfc1123z(t0 + node.created)} "
                     f"\t{reason} \t{message}")
    lines.append("Addresses:")
    lines += [f"  {kind}:\t{address}" for kind, address in node.addresses]
    for title, values in (("Capacity", node.capacity), ("Allocatable", node.allocatable)):
        if values:
            lines.append(f"{title}:")
            lines += [f"  {r}:\t{_q(r, values[r])}" for r in sorted(values)]
    lines.append("System Info:")
    lines += [f"  {title}:\t{node.info.get(key, '')}" for title, key in SYSTEM_INFO]
    pods = sorted((p for p in view.pods if p.node == node.name and p.phase not in TERMINAL_PHASES),
                  key=lambda p: (p.namespace, p.name))
    lines += _pods_section(node, pods, view)
    events = _events([e for e in view.events if e.kind == "Node" and e.name == node.name], view)
    if events is None:
        lines.append("Events:\t<none>")
    text = tabulate("\n".join(lines), *DESCRIBE)
    return text if events is None else f"{text}\n{events}"
