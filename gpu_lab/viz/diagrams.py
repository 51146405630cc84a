"""Flow diagrams for the lessons, as self-contained SVG (``gpu_lab.charts.framework()`` ...).

Each function returns a ``Diagram``: Jupyter shows it inline through ``_repr_svg_`` (no
JavaScript, no network, so it renders offline, on Binder and in ``gpu-lab edition``'s HTML,
where nbconvert embeds ``image/svg+xml`` outputs as data-URI images), ``.svg`` is the text
and ``.save(path)`` writes it (``.svg``, or ``.png`` through vl-convert). Same bytes every call.

Sources, checked against Kubernetes v1.37:

- the extension points and their order: "Scheduling Framework"
  (https://kubernetes.io/docs/concepts/scheduling-eviction/scheduling-framework/) and
  "Scheduler Configuration" (https://kubernetes.io/docs/reference/scheduling/config/); which
  default plugin implements which point: the ``var _ fwk.<Point>Plugin = &X{}`` assertions
  in kubernetes/kubernetes ``pkg/scheduler/framework/plugins``
  (https://github.com/kubernetes/kubernetes/tree/master/pkg/scheduler/framework/plugins:
  ``noderesources/fit.go``, ``tainttoleration``, ``nodeaffinity``, ``podtopologyspread``,
  ``interpodaffinity``, ``dynamicresources/dynamicresources.go``, ``defaultpreemption``,
  ``defaultbinder``, ``queuesort``, ``schedulinggates``, ``gangscheduling``); the default
  profile and its score weights: ``pkg/scheduler/apis/config/v1/default_plugins.go``, as
  ``gpu_lab.sim.plugins.registry`` models it (tests/viz/test_viz_diagrams.py compares the
  two). In v1.37 (PodGroup in ``scheduling.k8s.io/v1beta1``) GangScheduling implements
  PreEnqueue, Permit (a member waits at most 5 minutes for ``minCount``) and
  PlacementFeasible, the pod-group cycle's check after each member; later sources drop its
  Permit and keep PlacementFeasible;
- the device plugin flow: "Device Plugins"
  (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/):
  Register, ListAndWatch, GetPreferredAllocation, Allocate and its ContainerAllocateResponse
  of envs, mounts, devices and CDI device names;
- gang admission: Kueue's "Run a Job" (https://kueue.sigs.k8s.io/docs/tasks/run/jobs/) and
  "Cluster Queue" (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/) docs, v0.17, API
  ``v1beta2``; "Gang Scheduling"
  (https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/);
- the GPU Operator: its operands and their rollout order in NVIDIA/gpu-operator
  ``controllers/state_manager.go``, and "About the NVIDIA GPU Operator" / "Troubleshooting"
  (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/);
- DRA: "Dynamic Resource Allocation"
  (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/),
  ``resource.k8s.io/v1``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._svg import SMALL_SIZE, Box, Canvas, Diagram

__all__ = ["EXTENSION_POINTS", "OPERATOR_STACK", "Diagram", "dra_objects", "framework",
           "gang_admission", "gpu_operator", "request_flow"]

#: (section, extension point, plugins of the default profile the lessons meet, note).
#: Score weights are the default profile's. Volume and image plugins are left out.
EXTENSION_POINTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("queue", "PreEnqueue", ("SchedulingGates", "DynamicResources", "GangScheduling"),
     "may the pod enter the queue? (gates removed, claims exist, minCount pods exist)"),
    ("queue", "QueueSort", ("PrioritySort",), "higher priority first, then older"),
    ("scheduling", "PreFilter", ("NodeResourcesFit", "NodeAffinity", "PodTopologySpread",
                                 "InterPodAffinity", "DynamicResources"), ""),
    ("scheduling", "Filter", ("NodeUnschedulable", "NodeResourcesFit", "TaintToleration",
                              "NodeAffinity", "PodTopologySpread", "InterPodAffinity",
                              "DynamicResources"), "per node: any rejection removes the node"),
    ("scheduling", "PostFilter", ("DynamicResources", "DefaultPreemption"),
     "only when no node passed Filter: free an idle claim, else preempt"),
    ("scheduling", "PreScore", ("NodeResourcesFit", "TaintToleration", "NodeAffinity",
                                "PodTopologySpread", "InterPodAffinity",
                                "NodeResourcesBalancedAllocation"), ""),
    ("scheduling", "Score", ("NodeResourcesFit ×1", "TaintToleration ×3", "NodeAffinity ×2",
                             "PodTopologySpread ×2", "InterPodAffinity ×2", "DynamicResources ×2",
                             "NodeResourcesBalancedAllocation ×1"), "weighted sum picks the node"),
    ("scheduling", "NormalizeScore", ("TaintToleration", "NodeAffinity", "PodTopologySpread",
                                      "InterPodAffinity", "DynamicResources"), "scale to 0-100"),
    ("scheduling", "Reserve", ("DynamicResources",), "hold the chosen devices (Unreserve undoes)"),
    ("scheduling", "Permit", ("GangScheduling",),
     "a PodGroup member waits until minCount have a node: all or nothing"),
    ("binding", "PreBind", ("DynamicResources",), "write the claim's allocation"),
    ("binding", "Bind", ("DefaultBinder",), "Binding: spec.nodeName"),
    ("binding", "PostBind", (), "informational: told after a successful bind"),
)

_SECTIONS = {
    "queue": "Scheduling queue",
    "scheduling": "Scheduling cycle: one pod at a time",
    "binding": "Binding cycle: may run for several pods at once",
}


def _column(canvas: Canvas, steps: list[tuple[str, str, str, str]], x: float, y: float, w: float,
            gap: float, labels: dict[str, str] | None = None, dashed: bool = False) -> list[Box]:
    """Boxes stacked top to bottom, each joined to the next by an arrow (labelled from
    ``labels[key of the upper box]``, written right of the arrow)."""
    boxes: list[Box] = []
    for key, title, body, tone in steps:
        box = canvas.box(key, x, y, w, title, body, tone)
        if boxes:
            upper = boxes[-1]
            label = (labels or {}).get(upper.key, "")
            canvas.arrow((upper.cx, upper.bottom), (box.cx, box.y), label, dashed=dashed,
                         label_at=(upper.cx + 8, (upper.bottom + box.y) / 2 + 4), anchor="start")
        boxes.append(box)
        y = box.bottom + gap
    return boxes


def framework() -> Diagram:
    """kube-scheduler's extension points, in order, with the default plugins at each."""
    c = Canvas("framework", 880, "kube-scheduler v1.37: the scheduling framework's extension points",
               "The extension points a pod passes, top to bottom, in the scheduling queue, the "
               "scheduling cycle and the binding cycle, each with the default plugins that run there.")
    y = c.note(16, 52, "Top to bottom, what one pod passes. Beside each point: the default "
                       "plugins there (score weights as ×n); volume and image plugins left out.",
               840, italic=True) + 6
    x_point, w_point, x_plugins, w_plugins = 36, 172, 236, 620
    previous: Box | None = None
    section = ""
    band_top = 0.0
    for sec, point, plugins, note in EXTENSION_POINTS:
        if sec != section:
            if section:
                c.band(20, band_top, 846, y - 6 - band_top, _SECTIONS[section], label_x=x_plugins)
                y += 8
            section, band_top = sec, y
            y += 22
        text = ", ".join(plugins) if plugins else "no default plugin"
        side = c.box(f"plugins:{point}", x_plugins, y, w_plugins, "", text, "white", note=note, h=32)
        box = c.box(point, x_point, y, w_point, point, "", "orange" if sec != "binding" else "green",
                    h=side.h)
        c.arrow((box.right, box.cy), (side.x, side.cy))
        if previous is not None:
            c.arrow((previous.cx, previous.bottom), (box.cx, box.y))
        previous = box
        y = box.bottom + 10
    c.band(20, band_top, 846, y - 6 - band_top, _SECTIONS[section], label_x=x_plugins)
    y += 14
    y = c.note(16, y, "A failure at any point sends the pod back to the queue; Unreserve releases "
                      "what Reserve held. With the GenericWorkload gate, a PodGroup is tried in one "
                      "pod-group cycle, where GangScheduling's PlacementFeasible asks after each member "
                      "whether minCount can still be met.", 850)
    c.note(16, y + 2, "Sources: kubernetes/kubernetes v1.37, pkg/scheduler/framework/plugins; "
                      "kubernetes.io, Scheduling Framework.", 850)
    return c.diagram()


def request_flow() -> Diagram:
    """A pod asking for ``nvidia.com/gpu: 2``, from the API server to the container; and how
    the device plugin's registration gives the node its allocatable."""
    c = Canvas("request_flow", 880, "A GPU request, from the API server to the container",
               "Left, top to bottom: the API server, kube-scheduler, the kubelet's device manager, "
               "the device plugin's Allocate, its answer, the container runtime with the NVIDIA "
               "Container Toolkit, the container. Right: the plugin's registration and ListAndWatch, "
               "which give the node its allocatable count.")
    c.text(30, 60, "Per pod: limits nvidia.com/gpu: 2", SMALL_SIZE, bold=True)
    c.text(560, 60, "Per plugin, kept live: registration", SMALL_SIZE, bold=True)
    steps = [
        ("api", "API server", "stores the Pod: limits nvidia.com/gpu: 2, an integer "
                              "(requests = limits)", "blue"),
        ("scheduler", "kube-scheduler", "binds the Pod to a node by the integer nvidia.com/gpu: "
                                        "allocatable minus requested >= 2 (NodeResourcesFit); "
                                        "a count, no device IDs", "orange"),
        ("kubelet", "kubelet: device manager", "picks 2 free, healthy device IDs; asks the "
                                               "plugin's GetPreferredAllocation first if it "
                                               "offers one", "green"),
        ("allocate", "device plugin: Allocate(ids)", "gRPC on the plugin's socket, before the "
                                                     "container is created", "violet"),
        ("answer", "AllocateResponse", "envs (NVIDIA_VISIBLE_DEVICES), mounts, device specs "
                                       "or CDI device names", "violet"),
        ("runtime", "container runtime + NVIDIA Container Toolkit", "containerd or CRI-O inject "
                                                                     "the device nodes and driver "
                                                                     "libraries", "green"),
        ("container", "container", "sees its 2 GPUs, and only those", "grey"),
    ]
    labels = {"api": "watch: a pending Pod", "scheduler": "Binding (spec.nodeName)",
              "kubelet": "Allocate(device IDs)", "allocate": "answers",
              "answer": "in CRI CreateContainer", "runtime": "starts"}
    left = _column(c, steps, 30, 72, 470, 34, labels)
    registration = [
        ("register", "device plugin: Register", "resource nvidia.com/gpu and its socket, "
                                                "on kubelet.sock", "violet"),
        ("listandwatch", "kubelet: ListAndWatch", "a stream of device IDs, each Healthy or "
                                                  "Unhealthy, resent on every change", "green"),
        ("allocatable", "Node status", "capacity and allocatable nvidia.com/gpu: 8 "
                                       "(allocatable counts healthy devices)", "blue"),
    ]
    right = _column(c, registration, 580, 72, 280, 34,
                    {"register": "ListAndWatch", "listandwatch": "kubelet patches"}, dashed=True)
    scheduler = left[1]
    c.arrow((right[-1].x, right[-1].cy), (scheduler.right, scheduler.cy), dashed=True)
    y = c.note(580, right[-1].bottom + 22, "The scheduler watches Nodes: this count is what "
                                           "NodeResourcesFit compares (dashed arrow).", 280)
    c.note(580, y + 8, "Dashed: the registration path. A plugin that dies takes allocatable to 0 "
                       "at once; capacity follows after a grace period (lesson 01).", 280)
    return c.diagram()


def gang_admission() -> Diagram:
    """A training Job through Kueue's quota (when) and kube-scheduler's gang (where)."""
    c = Canvas("gang_admission", 880, "Gang admission: Kueue decides when, kube-scheduler where",
               "Top to bottom: a suspended Job, its Kueue Workload, the LocalQueue, the ClusterQueue's "
               "quota check with cohort borrowing, admission, the Job unsuspended, its pods, and "
               "kube-scheduler placing them as a gang (PodGroup minCount at Permit, all or nothing).")
    kueue = [
        ("job", "Job (suspend: true)", "label kueue.x-k8s.io/queue-name; Kueue's webhook "
                                       "suspends it, so no pods exist yet", "blue"),
        ("workload", "Workload (kueue.x-k8s.io)", "Kueue's record of the Job: 8 pods × 2 GPUs",
         "orange"),
        ("localqueue", "LocalQueue", "in the Job's namespace; points at a ClusterQueue", "orange"),
        ("clusterqueue", "ClusterQueue: quota check", "nominalQuota of nvidia.com/gpu per "
                                                      "ResourceFlavor: do all 16 GPUs fit?",
         "orange"),
        ("admitted", "Admitted", "quota reserved for the whole Workload", "orange"),
        ("unsuspended", "Job unsuspended", "suspend: false, the flavor's node labels added",
         "blue"),
    ]
    scheduler = [
        ("pods", "Pods", "the Job controller creates all 8; each names its PodGroup", "blue"),
        ("kube-scheduler", "kube-scheduler: GangScheduling", "PreEnqueue: until minCount pods "
                                                             "exist; one pod-group cycle; Permit: "
                                                             "wait until minCount have a node",
         "green"),
        ("bound", "All bound, or none", "fewer than minCount fit: nothing binds, no GPU is held",
         "grey"),
    ]
    labels = {"job": "Kueue creates", "workload": "queue-name", "localqueue": "clusterQueue",
              "clusterqueue": "fits", "admitted": "Kueue unsuspends"}
    c.note(16, 54, "Kueue (v0.17, API v1beta2) admits a whole Job against quota; kube-scheduler's "
                   "native gang (v1.37) then places all its pods or none.", 850)
    x, w = 40, 420
    top = 72
    boxes = _column(c, kueue, x, top + 24, w, 30, labels)
    c.band(20, top, 840, boxes[-1].bottom + 10 - top, "Kueue: may the Job start? Quota, not nodes")
    top2 = boxes[-1].bottom + 30
    c.arrow((boxes[-1].cx, boxes[-1].bottom), (boxes[-1].cx, top2 + 24), "Job controller",
            label_at=(boxes[-1].cx + 8, boxes[-1].bottom + 24), anchor="start")
    lower = _column(c, scheduler, x, top2 + 24, w, 30, {"pods": "schedulingGroup",
                                                         "kube-scheduler": "Permit allows all"})
    c.band(20, top2, 840, lower[-1].bottom + 10 - top2,
           "kube-scheduler: where do the pods go? Free GPUs on real nodes", label_x=x + w / 2 + 14)
    cq = c.boxes["clusterqueue"]
    cohort = c.box("cohort", 560, cq.y - 40, 280, "Cohort",
                   "ClusterQueues lend unused quota: borrow up to borrowingLimit", "orange",
                   dashed=True)
    c.arrow((cohort.x, cohort.cy), (cq.right, cq.cy - 6), "borrow", dashed=True,
            label_at=((cohort.x + cq.right) / 2, cohort.cy - 8))
    wait = c.box("wait", 560, cohort.bottom + 26, 280, "No room: the Workload waits",
                 "the Job stays suspended: no pods, no GPUs held, no deadlock", "grey", dashed=True)
    c.arrow((cq.right, cq.cy + 10), (wait.x, wait.cy), "does not fit", dashed=True,
            label_at=((cq.right + wait.x) / 2, wait.cy + 16))
    ks = c.boxes["kube-scheduler"]
    group = c.box("podgroup", 560, ks.y, 280, "PodGroup (scheduling.k8s.io/v1beta1)",
                  "schedulingPolicy.gang.minCount: 8", "blue")
    c.arrow((group.x, group.cy), (ks.right, ks.cy), "minCount",
            label_at=((group.x + ks.right) / 2, group.cy - 8))
    c.note(560, group.bottom + 22, "Native gang scheduling: GenericWorkload feature gate (beta, "
                                   "off by default in v1.37).", 280)
    return c.diagram()


def _row(widths: Sequence[float], gap: float, right: float = 866) -> list[float]:
    """The x of each box of a row right-aligned at ``right``."""
    x = right - sum(widths) - gap * (len(widths) - 1)
    xs = []
    for w in widths:
        xs.append(x)
        x += w + gap
    return xs


def dra_objects() -> Diagram:
    """The DRA objects and who writes them, up to the CDI devices a container gets."""
    c = Canvas("dra_objects", 880, "Dynamic Resource Allocation: objects and who acts on them",
               "Top row: DeviceClass, ResourceClaimTemplate, ResourceClaim, Pod. The driver "
               "publishes a ResourceSlice per node; kube-scheduler's DynamicResources plugin "
               "allocates devices from it into the claim; the kubelet calls NodePrepareResources on "
               "the driver, which answers with CDI device names for the container runtime.")
    gap = 30
    widths = [176, 226, 186, 176]
    xs = _row(widths, gap)
    y1 = 76
    top = [
        ("deviceclass", "DeviceClass", "gpu.nvidia.com: a CEL selector on the driver's devices"),
        ("claimtemplate", "ResourceClaimTemplate", "requests: a device of a class, CEL selectors "
                                                   "(memory >= 40Gi)"),
        ("claim", "ResourceClaim", "one per pod, from the template; status.allocation"),
        ("pod", "Pod", "spec.resourceClaims names the claim (template)"),
    ]
    dc, rct, rc, pod = (c.box(key, x, y1, w, title, body, "blue", h=92)
                        for (key, title, body), x, w in zip(top, xs, widths))
    for a, b, label in ((rct, dc, "class"), (rct, rc, "stamps"), (pod, rc, "uses")):
        start, end = ((a.x, a.cy), (b.right, b.cy)) if b.x < a.x else ((a.right, a.cy), (b.x, b.cy))
        c.arrow(start, end, label, label_at=((start[0] + end[0]) / 2, a.y - 8))
    y2 = dc.bottom + 48
    sched = c.box("dynamicresources", dc.x, y2, rct.right - dc.x, "kube-scheduler: DynamicResources",
                  "Filter: devices in the node's ResourceSlices that match the class and the "
                  "selectors; Reserve, PreBind: write the claim's allocation", "orange", h=92)
    slice_ = c.box("resourceslice", rc.x, y2, rc.w, "ResourceSlice", "per node: devices with "
                                                                    "attributes and capacities",
                   "violet", h=92)
    driver = c.box("driver", pod.x, y2, pod.w, "DRA driver", "gpu.nvidia.com's kubelet plugin, "
                                                              "on each node", "violet", h=92)
    c.arrow((driver.x, driver.cy), (slice_.right, slice_.cy), "publishes",
            label_at=((driver.x + slice_.right) / 2, driver.bottom + 16))
    c.arrow((slice_.x, slice_.cy), (sched.right, sched.cy), "reads",
            label_at=((slice_.x + sched.right) / 2, sched.bottom + 16))
    c.arrow((dc.cx, dc.bottom), (dc.cx, sched.y), "reads",
            label_at=(dc.cx + 8, (dc.bottom + sched.y) / 2 + 4), anchor="start")
    c.arrow((sched.right - 40, sched.y), (rc.x + 40, rc.bottom), "allocation", dashed=True,
            label_at=(sched.right - 36, (rc.bottom + sched.y) / 2 + 4), anchor="end")
    y3 = sched.bottom + 52
    widths3 = [222, 170, 196, 172]
    xs3 = _row(widths3, gap)
    steps = [
        ("prepare", "kubelet: NodePrepareResources", "for the bound Pod's claims", "green"),
        ("driver-prepare", "DRA driver", "prepares the devices, writes CDI specs", "violet"),
        ("cdi", "CDI device names", "gpu.nvidia.com/gpu=...", "violet"),
        ("container", "container runtime", "injects them: the container sees its GPU", "grey"),
    ]
    row = [c.box(key, x, y3, w, title, body, tone, h=80)
           for (key, title, body, tone), x, w in zip(steps, xs3, widths3)]
    for a, b in zip(row, row[1:]):
        c.arrow((a.right, a.cy), (b.x, b.cy))
    c.arrow((row[0].cx, sched.bottom), (row[0].cx, row[0].y), "Pod bound: the kubelet starts it",
            label_at=(row[0].cx + 8, (sched.bottom + row[0].y) / 2 + 4), anchor="start")
    c.note(16, row[0].bottom + 24, "Blue: API objects (resource.k8s.io/v1). Violet: the vendor's "
                                   "driver and what it publishes. No count like nvidia.com/gpu: "
                                   "the scheduler sees the devices themselves.", 850)
    return c.diagram()


#: The GPU Operator's operands on a GPU node, in the order its ClusterPolicy controller
#: rolls them out (NVIDIA/gpu-operator ``controllers/state_manager.go``: pre-requisites,
#: driver, container toolkit, operator validation, device plugin, MPS control daemon, DCGM,
#: dcgm-exporter, GPU Feature Discovery, MIG manager, ...); those after the driver wait for it
#: and the toolkit (init containers validate the driver and the toolkit). (key, DaemonSet, what it
#: does, what a node shows when it is broken).
OPERATOR_STACK: tuple[tuple[str, str, str, str], ...] = (
    ("nfd", "Node Feature Discovery", "labels feature.node.kubernetes.io/pci-10de.present=true "
     "(10de: NVIDIA's PCI vendor ID); the operator then labels nvidia.com/gpu.present=true",
     "no operand pod on the node at all"),
    ("driver", "nvidia-driver-daemonset", "builds and loads the kernel driver (or a "
     "preinstalled one is used)", "driver pod CrashLoopBackOff; every later pod stuck in Init"),
    ("toolkit", "nvidia-container-toolkit-daemonset", "configures containerd / CRI-O for the "
     "NVIDIA runtime and CDI", "toolkit pod in Init (waits for the driver); GPU pods fail to start"),
    ("validator", "nvidia-operator-validator", "runs driver, toolkit, CUDA and plugin checks as "
     "init containers", "the first failing init container names the broken layer"),
    ("plugin", "nvidia-device-plugin-daemonset", "registers nvidia.com/gpu with the kubelet "
     "(lesson 01)", "no nvidia.com/gpu in capacity, or allocatable 0"),
    ("dcgm", "nvidia-dcgm-exporter", "DCGM's GPU metrics per pod (lesson 08)",
     "no DCGM_FI_* series; scheduling is unaffected"),
    ("gfd", "gpu-feature-discovery", "labels nvidia.com/gpu.product, .memory, .count, MIG "
     "and sharing labels", "pods selecting nvidia.com/gpu.product stay Pending"),
    ("mig", "nvidia-mig-manager", "applies nvidia.com/mig.config with mig-parted (lesson 02)",
     "nvidia.com/mig.config.state=failed; the MIG resources never appear"),
)


def gpu_operator() -> Diagram:
    """What the GPU Operator installs on a GPU node, in order, and how each layer fails."""
    c = Canvas("gpu_operator", 880, "The GPU Operator's stack on one node, in rollout order",
               "Top to bottom, in rollout order: Node Feature Discovery, the driver, the container "
               "toolkit, the validator, the device plugin, dcgm-exporter, GPU Feature Discovery and "
               "the MIG manager; beside each, what a node shows when that layer is broken.")
    c.text(30, 60, "DaemonSet (namespace gpu-operator), in rollout order", SMALL_SIZE, bold=True)
    c.text(540, 60, "When it is broken, the node shows", SMALL_SIZE, bold=True)
    tones = {"nfd": "grey", "driver": "orange", "toolkit": "orange", "validator": "grey",
             "plugin": "violet", "dcgm": "green", "gfd": "blue", "mig": "blue"}
    steps = [(key, name, does, tones[key]) for key, name, does, _ in OPERATOR_STACK]
    boxes = _column(c, steps, 30, 72, 480, 22)
    for (_, _, _, broken), box in zip(OPERATOR_STACK, boxes, strict=True):
        c.note(540, box.y + 18, broken, 320)
    c.note(30, boxes[-1].bottom + 24, "The operands after the driver wait for it and for the "
                                      "toolkit (init containers validate both), so a broken driver "
                                      "or toolkit leaves every operand below it in Init: read the "
                                      "first pod in this order that is not Running (kubectl get "
                                      "pods -n gpu-operator -o wide --field-selector "
                                      "spec.nodeName=<node>).", 830)
    return c.diagram()
