"""Nodes for the simulator: gpu-lab's ``NodePool`` and plain ``v1 Node`` documents.

A learner describes hardware the way a cloud console does ("two H100 boxes
with 8 GPUs each") and gets the Nodes a real cluster would show once the
kubelet, GPU Feature Discovery and NVIDIA's device plugin have run: the same
labels, the same capacity, the same device IDs. ``NodePool`` is our own kind:

    apiVersion: gpulab.dev/v1alpha1
    kind: NodePool
    metadata: {name: h100}
    spec:
      count: 2                       # nodes h100-0, h100-1
      gpu: {model: H100-80GB, count: 8, numaNodes: 2}  # numaNodes optional: see below
      cpu: "96"                      # optional with a gpu: see below
      memory: 1024Gi                 # optional with a gpu: see below
      ephemeralStorage: 100Gi        # optional, default 100Gi
      pods: 110                      # optional, default 110
      instanceType: p5.48xlarge      # optional: node.kubernetes.io/instance-type
      zones: [us-east-1a, us-east-1b]  # optional: node i gets topology.kubernetes.io/zone zones[i % len]
      systemReserved: {cpu: 500m, memory: 2Gi}  # optional: the kubelet's; allocatable = capacity - it
      labels: {}                     # applied last, so they can override
      taints: []                     # [{key, value, effect}]
      devicePlugin: {version: v1, flags: {migStrategy: mixed}}  # NVIDIA plugin config, verbatim
      mig: {config: all-balanced}    # mig-parted config name, applied to every node of the pool
      autoscaling: {minCount: 0, maxCount: 8, provisioningDelay: 5m}  # optional: see below
      pricePerHour: 98.32            # optional: USD per node-hour, over the catalog's price
      dra: {}                        # optional: NVIDIA's DRA driver instead of the device plugin
      topologyManagerPolicy: none    # optional: the kubelet's; none, best-effort, restricted,
                                     # single-numa-node (gpu_lab.kubelet.topologymanager)

``mig.config`` names one of NVIDIA's predefined mig-parted configs for the GPU
model (``all-disabled``, ``all-enabled``, ``all-<profile>``, ``all-balanced``;
see ``gpu_lab.gpus.migparted``) or, with ``mig.migParted`` holding a whole
mig-parted file (``version: v1``, ``mig-configs: ...``), one of that file's
configs. Every layout is checked against the MIG geometry. The node then
shows what the GPU Operator leaves behind: ``nvidia.com/mig.config`` and
``nvidia.com/mig.config.state=success``, and the resources, labels and
``MIG-<uuid>`` device IDs the device plugin's ``migStrategy`` gives
(``gpu_lab.gpus.labels.gpu_node_state``): ``single`` needs one profile on every
GPU and advertises instances as ``nvidia.com/gpu``; ``mixed`` advertises
``nvidia.com/mig-<profile>``; ``none`` keeps advertising whole GPUs (with a
warning in ``Node.raw["warnings"]`` when MIG is on, since such a GPU is
useless to a container). A pool whose plugin would refuse to start (single
with several profiles, MIG enabled without instances under single/mixed,
MPS on MIG) is an error.

``gpu.numaNodes`` splits the GPUs over NUMA nodes in contiguous blocks (GPU0.. on node
0), which the device plugin reports per device and the Topology Manager acts on; left
out, gpu-lab's model decides: two for eight or more GPUs, one below
(``gpu_lab.gpus.topology``).

``cpu`` and ``memory`` may be left out when the pool has GPUs: they default
to the catalog's reference machine for the GPU model
(``gpu_lab.gpus.catalog.GpuModel.reference``, the AWS instance type the price
comes from), scaled per GPU: the reference machine's vCPUs and memory divided
by its GPU count, times ``gpu.count``. Eight H100 give ``192`` cpu and
``2048Gi`` (a p5.48xlarge); four L4 give ``16`` and ``64Gi`` (4 x g6.xlarge).
A value given in the spec always wins; a pool without GPUs must give both.

Capacity equals allocatable: there are no system reservations to teach here,
and the scheduler only reads allocatable. Defaulted cpu and memory are
capacity like given ones.

``autoscaling`` makes the pool a node group an autoscaler may resize
(``gpu_lab.sim.autoscaler``): between ``minCount`` (default 0) and ``maxCount``
(required) nodes; ``count`` may then be left out and defaults to ``minCount``,
and a given ``count`` must lie in that range. ``provisioningDelay`` (a Go
duration, default ``5m``) is how long a new node takes from the autoscaler's
request until it is Ready *and* its device plugin advertises GPUs. We chose
5m: the cloud boots the VM and the kubelet registers in a minute or two, then
the GPU driver and NVIDIA's device plugin take minutes more; cluster-autoscaler
allows 15m (its ``--max-node-provision-time`` default) and its authors note
that "when a machine with GPU becomes ready it can take up to 15 minutes before
it reports that GPU is allocatable" (a commit message in the history of
cluster-autoscaler's ``utils/gpu`` package). ``node_pool(doc).node(i)`` makes node ``<pool>-<i>`` of a pool
on demand, for an autoscaler adding nodes later. ``pricePerHour`` (USD per
node-hour, a number) replaces the catalog price, GPUs x per-GPU price
(``gpu_lab.gpus.pricing``), for cost figures.

``dra`` hands the pool's GPUs to NVIDIA's DRA driver (``gpu.nvidia.com``): the
nodes advertise no ``nvidia.com/*`` resources (GFD's labels stay) and the GPUs
are published as ``resource.k8s.io/v1`` ResourceSlices instead (whole GPUs, the
static MIG devices of ``mig``, or with ``dra: {dynamicMIG: true}`` every MIG
placement as a partitionable device; see ``gpu_lab.dradriver.resourceslices``).
It cannot be combined with ``devicePlugin``, nor ``dynamicMIG`` with ``mig``.

Like the API server, validation reports every error of a pool at once: one
error reads ``NodePool "x": spec.count: Required value``, several read
``NodePool "x" is invalid: [spec.count: ..., spec.gpu.model: ...]`` in spec
field order (``InvalidNodePool.errors`` holds the list). Inside ``mig`` and
the device plugin's ``sharing`` config, the first error of that block stops
that block only.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, overload

from ..errors import (
    DeviceListTooLarge,
    GpuLabError,
    InvalidNodePool,
    MigPartedError,
    QuantityError,
)
from ..gpus.catalog import get_model
from ..gpus.labels import (
    MAX_GPUS_PER_NODE,
    MIG_STRATEGIES,
    GpuNodeState,
    gpu_node_state,
    parse_sharing,
)
from ..gpus.migparted import resolve
from ..gpus.topology import MAX_NUMA_NODES, TOPOLOGY_MANAGER_POLICIES
from ..names import POOL_LABEL
from .duration import parse_duration
from .objects import TAINT_EFFECTS, Node, Taint, is_extended_resource
from .quantity import milli_value, parse_quantity, value

API_VERSION = "gpulab.dev/v1alpha1"
KIND = "NodePool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # set by the user; the GPU Operator's MIG manager acts on it
MIG_STATE_LABEL = "nvidia.com/mig.config.state"  # written by the MIG manager
DEFAULT_PODS = 110
MAX_NODES = 5000  # Kubernetes supports clusters of up to 5,000 nodes
DEFAULT_EPHEMERAL_STORAGE = "100Gi"
SPEC_FIELDS = ("count", "autoscaling", "gpu", "cpu", "memory", "ephemeralStorage", "pods",
               "instanceType", "pricePerHour", "zones", "systemReserved", "labels", "taints",
               "devicePlugin", "mig", "dra", "topologyManagerPolicy")
ZONE_LABEL = "topology.kubernetes.io/zone"
#: what the kubelet's systemReserved may hold that a NodePool node has
RESERVABLE = ("cpu", "ephemeral-storage", "memory")
DRA_FIELDS = ("dynamicMIG",)
AUTOSCALING_FIELDS = ("minCount", "maxCount", "provisioningDelay")
# VM boot and kubelet registration, then the GPU driver and the device plugin (module docstring).
DEFAULT_PROVISIONING_DELAY = "5m"

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_LABEL_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
              f"with an alphanumeric character (regex used for validation is '{_LABEL_NAME}')")


class _Stop(Exception):
    """Ends the check of one field once its error is recorded; the pool's other fields go on."""


@dataclass(frozen=True)
class PoolAutoscaling:
    """``spec.autoscaling`` of a NodePool: node count bounds and the time a new node takes."""

    min_count: int
    max_count: int
    provisioning_delay: float  # seconds from the scale-up request to a Ready node with GPUs advertised


class PoolNodes:
    """A validated NodePool that makes its Nodes on demand: ``node(i)`` is ``<pool>-<i>``.

    ``count`` is the number of nodes the pool starts with, ``autoscaling`` its
    ``spec.autoscaling`` (None when the pool has a fixed size) and
    ``price_per_hour`` its ``spec.pricePerHour`` (None: the catalog's price).
    An autoscaler adding nodes later calls ``node(i)`` with indices past the
    ones in use; the device IDs follow from the node name, as for the first nodes.
    """

    def __init__(self, pool: _Pool):
        self._pool = pool
        self.name = pool.name
        self.count = pool.count
        self.autoscaling = pool.autoscaling
        self.price_per_hour = pool.price_per_hour
        self.spec = pool.spec

    def node(self, index: int) -> Node:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise GpuLabError(f'NodePool "{self.name}": node index must be a non-negative integer, got {index!r}')
        name = f"{self.name}-{index}"
        if len(name) > 63:  # node names double as kubernetes.io/hostname label values
            raise GpuLabError(f'NodePool "{self.name}": node name "{name}" must be no more than 63 characters')
        return self._pool.node(index)


def node_pool(raw: dict[str, Any]) -> PoolNodes:
    """Validate a ``NodePool`` document (every error at once) and return it as a node factory."""
    if not isinstance(raw, dict):
        raise GpuLabError("NodePool: the document must be a mapping")
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name")
    if not name:
        raise GpuLabError("NodePool: metadata.name: Required value")
    if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
        raise GpuLabError(f'NodePool "{name}": apiVersion/kind must be {API_VERSION}/{KIND}, '
                          f'got {raw.get("apiVersion")}/{raw.get("kind")}')
    return PoolNodes(_Pool(str(name), raw.get("spec")))


def make_pool_node(raw: dict[str, Any], index: int) -> Node:
    """Node ``<pool>-<index>`` of a ``NodePool`` document (validated first)."""
    return node_pool(raw).node(index)


def expand_node_pool(raw: dict[str, Any], max_devices: int | None = None) -> list[Node]:
    """Validate a ``NodePool`` document and return its Nodes, ``<pool>-0`` upward.

    ``max_devices`` bounds the device IDs the pool's nodes may advertise together."""
    pool = node_pool(raw)
    if pool.count:
        first = pool.node(0)
        per_node = sum(len(ids) for ids in first.devices.values())
        if max_devices is not None and per_node * pool.count > max_devices:
            raise InvalidNodePool(pool.name, [
                f"spec.count: Invalid value: {pool.count}: {pool.count} nodes x {per_node} devices is "
                f"{per_node * pool.count} GPU devices; the simulator holds at most {max_devices} more"])
        return [first] + [pool.node(i) for i in range(1, pool.count)]
    return []


@overload
def spec_duration(value: Any, *, never: Literal[False] = False) -> float: ...


@overload
def spec_duration(value: Any, *, never: bool) -> float | None: ...


def spec_duration(value: Any, *, never: bool = False) -> float | None:
    """A Go duration given in a spec field ("90s", "5m", "1h30m", "0s"), in seconds.

    ``never`` also accepts ``"Never"`` (returned as None), as Karpenter's
    ``consolidateAfter`` does. Bad input raises ``ValueError`` whose text
    follows the field name in an API-server error (``Invalid value: ...``).
    """
    if never and value == "Never":
        return None
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"Invalid value: {value!r}: must be a duration string such as 90s, 5m or 1h30m")
    text = value.strip()
    if text.startswith("-"):
        raise ValueError(f'Invalid value: "{value}": must be greater than or equal to 0')
    if text == "0":  # Go's time.ParseDuration accepts a bare 0
        return 0.0
    try:
        return parse_duration(text)
    except GpuLabError:
        allowed = ', or "Never"' if never else ""
        raise ValueError(f'Invalid value: "{value}": must be a duration such as 90s, 5m or 1h30m'
                         f"{allowed}") from None


def pool_gpu_state(node_name: str, pool_name: str, spec: dict[str, Any], *,
                   strict: bool = True) -> tuple[GpuNodeState, str | None, list | None]:
    """The GPU side of one node of a pool: (state, MIG config name, per-GPU MIG layouts).

    With ``strict=False`` a layout the device plugin would refuse is not an
    error: the state shows what a real node shows then (``-MIG-INVALID``
    labels, nothing advertised, warnings). MIG reconfiguration uses this.
    """
    pool = _Pool(pool_name, spec, strict=strict)
    return pool.gpu_state(node_name), pool.mig_config, pool.mig_layouts


class _Pool:
    """One NodePool's spec, checked field by field; errors name pool and field.

    Every field is checked even after another failed, in ``SPEC_FIELDS``
    order; ``fail`` records an error and stops only the check it is in. If
    any error was recorded, the constructor raises ``InvalidNodePool`` with all.
    """

    def __init__(self, name: str, spec: Any, strict: bool = True):
        self.name = name
        self.strict = strict
        self.errors: list[str] = []
        if not re.fullmatch(_DNS1123_LABEL, name):
            self.record("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 label must '
                        "consist of lower case alphanumeric characters or '-', and must start and end "
                        f"with an alphanumeric character (regex used for validation is '{_DNS1123_LABEL}')")
        if not isinstance(spec, dict):
            self.record("spec", "Required value" if spec is None else "must be a mapping")
            raise InvalidNodePool(name, self.errors)
        for field in sorted(set(spec) - set(SPEC_FIELDS)):
            self.record(f"spec.{field}", f"unknown field (known: {', '.join(SPEC_FIELDS)})")
        self.spec = spec
        count = spec.get("count")
        count_ok = True
        if count is None and spec.get("autoscaling") is not None:
            self.count = None  # minCount, once spec.autoscaling is read
        else:
            before = len(self.errors)
            self.count = self.check(self.integer, "spec.count", count, required=True, default=0)
            if self.count > MAX_NODES:
                self.record("spec.count", f"Invalid value: {self.count}: must be no more than {MAX_NODES} "
                            "(Kubernetes supports clusters of up to 5000 nodes)")
                self.count = 0
            count_ok = len(self.errors) == before
        self.autoscaling = self.check(self.read_autoscaling, spec.get("autoscaling"))
        scaling = self.autoscaling
        if self.count is None:
            self.count = scaling.min_count if scaling else 0
        elif scaling and count_ok and not scaling.min_count <= self.count <= scaling.max_count:
            self.record("spec.count", f"Invalid value: {self.count}: must be between spec.autoscaling.minCount "
                        f"({scaling.min_count}) and spec.autoscaling.maxCount ({scaling.max_count})")
        most = max(self.count, scaling.max_count if scaling else 0)
        last = f"{name}-{max(most - 1, 0)}"
        if len(last) > 63:  # node names double as kubernetes.io/hostname label values
            self.record("metadata.name", f'Invalid value: "{name}": node name "{last}" must be no more '
                        "than 63 characters")
        self.read_gpu(spec.get("gpu"))
        self.resources = {
            "cpu": milli_value(self.check(self.quantity, "spec.cpu", self.sized("cpu"), default=0)),
            "memory": value(self.check(self.quantity, "spec.memory", self.sized("memory"), default=0)),
            "ephemeral-storage": value(self.check(
                self.quantity, "spec.ephemeralStorage",
                spec.get("ephemeralStorage", DEFAULT_EPHEMERAL_STORAGE), default=0)),
            "pods": self.check(self.integer, "spec.pods", spec.get("pods", DEFAULT_PODS), default=0),
        }
        self.instance_type = spec.get("instanceType")
        if self.instance_type is not None:
            self.instance_type = self.check(self.label_value, "spec.instanceType", self.instance_type)
        self.price_per_hour = self.check(self.price, "spec.pricePerHour", spec.get("pricePerHour"))
        self.zones = self.check(self.read_zones, spec.get("zones"), default=[])
        self.reserved = self.check(self.read_reserved, spec.get("systemReserved"), default={})
        self.user_labels = self.check(_labels, spec.get("labels"), "spec.labels", self.fail, default={})
        self.taints = self.check(_taints, spec.get("taints"), "spec.taints", self.fail, default=[])
        self.read_device_plugin(spec.get("devicePlugin"))
        self.check(self.read_mig, spec.get("mig"))
        self.dra = self.check(self.read_dra, spec.get("dra"))
        self.topology_policy = spec.get("topologyManagerPolicy", "none")
        if self.topology_policy not in TOPOLOGY_MANAGER_POLICIES:
            supported = ", ".join(f'"{p}"' for p in sorted(TOPOLOGY_MANAGER_POLICIES))
            self.record("spec.topologyManagerPolicy",
                        f'Unsupported value: {self.topology_policy!r}: supported values: {supported}')
            self.topology_policy = "none"
        if not self.errors and self.model is not None and self.gpus:
            try:  # what a node of the pool advertises must fit the kubelet's gRPC limit
                self.gpu_state(f"{name}-0")
            except DeviceListTooLarge as err:
                self.record(self.replicas_field(err.resource), f"Invalid value: {err.replicas}: {err}")
        if self.errors:
            raise InvalidNodePool(name, self.errors)

    def replicas_field(self, resource: str) -> str:
        """The ``replicas`` entry of the device plugin's sharing config for ``resource``."""
        sharing = (self.device_plugin or {}).get("sharing") or {}
        for key in ("timeSlicing", "mps"):
            for i, res in enumerate((sharing.get(key) or {}).get("resources") or []):
                if isinstance(res, dict) and resource.removesuffix(".shared") == res.get("name"):
                    return f"spec.devicePlugin.sharing.{key}.resources[{i}].replicas"
        return "spec.devicePlugin.sharing"

    def record(self, field: str, message: str) -> None:
        self.errors.append(f"{field}: {message}")

    def fail(self, field: str, message: str) -> NoReturn:
        """Record an error and stop the check in progress (``check`` resumes with the next field)."""
        self.record(field, message)
        raise _Stop

    def check(self, fn, *args, default: Any = None, **kwargs):
        """``fn(*args, **kwargs)``, or ``default`` once it has recorded an error."""
        try:
            return fn(*args, **kwargs)
        except _Stop:
            return default

    def sized(self, resource: str) -> Any:
        """``spec.cpu``/``spec.memory``, else the GPU model's reference machine scaled per GPU.

        ``None`` (a Required value error) when there is no GPU to size from;
        ``0`` (no error of its own) when ``spec.gpu`` is there but wrong,
        since fixing the GPU fixes the default too.
        """
        given = self.spec.get(resource)
        if given is not None:
            return given
        if self.model is not None and self.gpus and self.model.reference is not None:
            ref = self.model.reference
            return ref.cpu(self.gpus) if resource == "cpu" else ref.memory(self.gpus)
        return 0 if self.gpu_invalid else None

    def integer(self, field: str, val: Any, required: bool = False) -> int:
        if val is None and required:
            self.fail(field, "Required value")
        if isinstance(val, bool) or not isinstance(val, int):
            self.fail(field, f"Invalid value: {val!r}: must be an integer")
        if val < 0:
            self.fail(field, f"Invalid value: {val}: must be greater than or equal to 0")
        return val

    def price(self, field: str, val: Any) -> float | None:
        if val is None:
            return None
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            self.fail(field, f"Invalid value: {val!r}: must be a number (USD per node-hour)")
        if val != val or val in (float("inf"), float("-inf")):
            self.fail(field, f"Invalid value: {val}: must be a finite number")
        if val < 0:
            self.fail(field, f"Invalid value: {val}: must be greater than or equal to 0")
        return float(val)

    def read_autoscaling(self, raw: Any) -> PoolAutoscaling | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            self.fail("spec.autoscaling", "must be a mapping with minCount, maxCount and provisioningDelay")
        before = len(self.errors)
        for field in sorted(set(raw) - set(AUTOSCALING_FIELDS)):
            self.record(f"spec.autoscaling.{field}", f"unknown field (known: {', '.join(AUTOSCALING_FIELDS)})")
        low = self.check(self.integer, "spec.autoscaling.minCount", raw.get("minCount", 0))
        high = self.check(self.integer, "spec.autoscaling.maxCount", raw.get("maxCount"), required=True)
        for field, val in (("minCount", low), ("maxCount", high)):
            if val is not None and val > MAX_NODES:
                self.record(f"spec.autoscaling.{field}", f"Invalid value: {val}: must be no more than "
                            f"{MAX_NODES} (Kubernetes supports clusters of up to 5000 nodes)")
        if low is not None and high is not None and high < low:
            # the HorizontalPodAutoscaler's words for maxReplicas < minReplicas
            self.record("spec.autoscaling.maxCount", f"Invalid value: {high}: must be greater than or "
                        "equal to `minCount`")
        delay = self.check(self.duration, "spec.autoscaling.provisioningDelay",
                           raw.get("provisioningDelay", DEFAULT_PROVISIONING_DELAY))
        if len(self.errors) > before:
            raise _Stop
        return PoolAutoscaling(low, high, delay)

    def read_zones(self, raw: Any) -> list[str]:
        """A pool spread over zones: node i in ``raw[i % len(raw)]``."""
        if raw is None:
            return []
        if not isinstance(raw, list) or not raw:
            self.fail("spec.zones", f"Invalid value: {raw!r}: must be a non-empty list of zone names")
        before = len(self.errors)
        seen: set[str] = set()
        for i, zone in enumerate(raw):
            value = self.check(self.label_value, f"spec.zones[{i}]", zone)
            if value is None:
                continue
            if not value:
                self.record(f"spec.zones[{i}]", "Required value")
            elif value in seen:
                self.record(f"spec.zones[{i}]", f'Duplicate value: "{value}"')
            seen.add(value)
        if len(self.errors) > before:
            raise _Stop
        return list(raw)

    def read_reserved(self, raw: Any) -> dict[str, int]:
        """The kubelet's ``systemReserved`` for every node of the pool, in internal units."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.fail("spec.systemReserved", f"Invalid value: {raw!r}: must be a mapping of resource "
                      "to quantity")
        before = len(self.errors)
        out: dict[str, int] = {}
        for name in sorted(raw):
            if name not in RESERVABLE:
                self.record(f"spec.systemReserved.{name}", f'Unsupported value: "{name}": supported '
                            f"values: {', '.join(chr(34) + r + chr(34) for r in RESERVABLE)}")
                continue
            q = self.check(self.quantity, f"spec.systemReserved.{name}", raw[name])
            if q is not None:
                out[name] = milli_value(q) if name == "cpu" else value(q)
        if len(self.errors) > before:
            raise _Stop
        return out

    def duration(self, field: str, val: Any) -> float:
        try:
            return spec_duration(val)
        except ValueError as err:
            self.fail(field, str(err))

    def quantity(self, field: str, val: Any):
        if val is None:
            self.fail(field, "Required value")
        try:
            q = parse_quantity(val)
        except QuantityError as err:
            self.fail(field, str(err))
        if q < 0:
            self.fail(field, f'Invalid value: "{val}": must be greater than or equal to 0')
        return q

    def label_value(self, field: str, val: Any) -> str:
        if not isinstance(val, str):
            self.fail(field, f"Invalid value: {val!r}: must be a string (quote it in YAML)")
        if len(val) > 63 or (val and not re.fullmatch(_LABEL_NAME, val)):
            self.fail(field, f'Invalid value: "{val}": a valid label value must be no more than 63 '
                      f"characters and {_LABEL_MSG}")
        return val

    def read_gpu(self, gpu: Any) -> None:
        self.model, self.gpus, self.gpu_invalid, self.numa_nodes = None, 0, False, None
        if gpu is None:
            return
        before = len(self.errors)
        if not isinstance(gpu, dict):
            self.record("spec.gpu", "must be a mapping with model and count")
            self.gpu_invalid = True
            return
        for field in sorted(set(gpu) - {"model", "count", "numaNodes"}):
            self.record(f"spec.gpu.{field}", "unknown field (known: model, count, numaNodes)")
        gpus = self.check(self.integer, "spec.gpu.count", gpu.get("count"), required=True)
        self.numa_nodes = None
        if gpu.get("numaNodes") is not None:
            numa = self.check(self.integer, "spec.gpu.numaNodes", gpu["numaNodes"])
            if numa is not None and not 1 <= numa <= MAX_NUMA_NODES:
                self.record("spec.gpu.numaNodes", f"Invalid value: {numa}: must be between 1 and "
                            f"{MAX_NUMA_NODES} (the Topology Manager's limit)")
            elif numa is not None:
                self.numa_nodes = numa
        if gpus is not None and gpus > MAX_GPUS_PER_NODE:
            self.record("spec.gpu.count", f"Invalid value: {gpus}: must be no more than "
                        f"{MAX_GPUS_PER_NODE} (no machine holds more GPUs)")
            gpus = None
        if gpu.get("model") is None:
            if gpus:
                self.record("spec.gpu.model", "Required value")
        else:
            try:
                self.model = get_model(gpu["model"])
            except GpuLabError as err:
                self.record("spec.gpu.model", str(err))
        self.gpus = gpus or 0
        self.gpu_invalid = len(self.errors) > before

    def read_device_plugin(self, config: Any) -> None:
        self.device_plugin = config
        self.mig_strategy = "none"
        self.sharing = parse_sharing(None)
        self.plugin_invalid = False
        if config is None:
            return
        before = len(self.errors)
        if not isinstance(config, dict):
            self.record("spec.devicePlugin", "must be the device plugin's config mapping")
            self.plugin_invalid = True
            return
        if config.get("version", "v1") != "v1":
            self.record("spec.devicePlugin.version", f"unknown version: {config['version']}")
        flags = config.get("flags") or {}
        strategy = flags.get("migStrategy", "none") if isinstance(flags, dict) else None
        if strategy in MIG_STRATEGIES:
            self.mig_strategy = strategy
        else:
            self.record("spec.devicePlugin.flags.migStrategy",
                        f'Unsupported value: "{strategy}": supported values: "none", "single", "mixed"')
        try:
            self.sharing = parse_sharing(config.get("sharing"), "spec.devicePlugin.sharing")
        except GpuLabError as err:
            self.errors.append(str(err))  # already "spec.devicePlugin.sharing...: ..."
        if self.sharing.strategy == "mps" and strategy == "mixed":
            self.record("spec.devicePlugin.flags.migStrategy",
                        "using --mig-strategy=mixed is not supported with MPS")
        self.plugin_invalid = len(self.errors) > before

    def read_mig(self, mig: Any) -> None:
        self.mig_config, self.mig_layouts = None, None
        if mig is None:
            return
        if not isinstance(mig, dict):
            self.fail("spec.mig", "must be a mapping with config (and optionally migParted)")
        for field in sorted(set(mig) - {"config", "migParted"}):
            self.record(f"spec.mig.{field}", "unknown field (known: config, migParted)")
        if self.model is not None and not self.model.mig_capable:
            self.fail("spec.mig", f"{self.model.name} GPUs do not support MIG")
        name, parted = mig.get("config"), mig.get("migParted")
        if name is not None and not isinstance(name, str):
            self.fail("spec.mig.config", f"Invalid value: {name!r}: must be a string")
        if name is None and parted is None:
            self.fail("spec.mig.config", "Required value")
        if name is not None:
            self.label_value("spec.mig.config", name)  # it becomes the nvidia.com/mig.config label
        if self.model is None or not self.gpus:
            if not self.gpu_invalid:  # a wrong spec.gpu is reported there already
                self.fail("spec.mig", "MIG needs GPUs (spec.gpu.model and spec.gpu.count)")
            raise _Stop
        try:
            if parted is None:
                self.mig_layouts = resolve(self.model, self.gpus, name)
            else:
                if not isinstance(parted, dict):
                    self.fail("spec.mig.migParted", "must be a mig-parted file (version: v1, mig-configs)")
                self.mig_layouts = resolve(self.model, self.gpus, parted, name)
                if name is None:
                    name = next(iter(parted["mig-configs"]))
        except MigPartedError as err:
            field = "spec.mig.migParted" if parted is not None else "spec.mig.config"
            msg = str(err).removeprefix("mig-parted config: ")
            self.fail(field, msg)
        self.mig_config = name
        if self.strict and not self.plugin_invalid and self.spec.get("dra") is None:
            self.check_plugin_starts()

    def read_dra(self, dra: Any) -> dict | None:
        """``spec.dra``: NVIDIA's DRA driver publishes the GPUs as ResourceSlices instead of the
        device plugin advertising ``nvidia.com/*`` (see gpu_lab.dradriver.resourceslices)."""
        if dra is None:
            return None
        if not isinstance(dra, dict):
            self.fail("spec.dra", f"must be a mapping (known fields: {', '.join(DRA_FIELDS)})")
        for field in sorted(set(dra) - set(DRA_FIELDS)):
            self.record(f"spec.dra.{field}", f"unknown field (known: {', '.join(DRA_FIELDS)})")
        dynamic = dra.get("dynamicMIG", False)
        if not isinstance(dynamic, bool):
            self.fail("spec.dra.dynamicMIG", f"Invalid value: {dynamic!r}: must be true or false")
        if self.model is None or not self.gpus:
            if not self.gpu_invalid:
                self.fail("spec.dra", "the DRA driver needs GPUs (spec.gpu.model and spec.gpu.count)")
            raise _Stop
        if self.device_plugin is not None:
            self.fail("spec.devicePlugin", "Forbidden: the pool's GPUs are published by NVIDIA's DRA "
                      "driver (spec.dra), which replaces the device plugin")
        if dynamic and not self.model.mig_capable:
            self.fail("spec.dra.dynamicMIG", f"Invalid value: true: {self.model.name} GPUs do not support MIG")
        if dynamic and self.spec.get("mig") is not None:
            self.fail("spec.mig", "Forbidden: with spec.dra.dynamicMIG the driver creates MIG devices when "
                      "claims are allocated; remove spec.mig")
        return {"dynamicMIG": dynamic}

    def check_plugin_starts(self) -> None:
        """Refuse layouts the device plugin would refuse, rather than build a broken node."""
        layouts = self.mig_layouts
        assert layouts is not None  # read_mig calls this once it has resolved the layouts
        enabled = [(g, lay) for g, lay in enumerate(layouts) if lay is not None]
        if not enabled:
            return
        field = "spec.devicePlugin.flags.migStrategy"
        if self.sharing.strategy == "mps":
            self.fail("spec.devicePlugin.sharing.mps",
                      f'MPS sharing is not supported for MIG devices (config "{self.mig_config}" '
                      "enables MIG); use time-slicing or all-disabled")
        empty = [g for g, lay in enabled if not lay]
        if empty and self.mig_strategy != "none":
            self.fail(field, f'{self.mig_strategy}: config "{self.mig_config}" leaves GPU {empty[0]} with '
                      "MIG enabled and no MIG devices; the device plugin would fail to start")
        if self.mig_strategy == "single":
            kinds = sorted({p for _, lay in enabled for p in lay})
            if len(enabled) < self.gpus:
                off = next(g for g, lay in enumerate(layouts) if lay is None)
                self.fail(field, f'single: config "{self.mig_config}" leaves GPU {off} without MIG; '
                          "every GPU must have MIG enabled with one profile (use mixed)")
            if len(kinds) > 1:
                self.fail(field, f'single: config "{self.mig_config}" creates {", ".join(kinds)}; '
                          "every GPU must have instances of one profile (use mixed)")

    def gpu_state(self, node_name: str) -> GpuNodeState:
        if self.model is None or not self.gpus:
            return GpuNodeState({}, {}, {})
        state = gpu_node_state(node_name, self.model, self.gpus, sharing=self.sharing,
                               mig_strategy=self.mig_strategy, mig_layouts=self.mig_layouts,
                               machine=self.instance_type, numa_nodes=self.numa_nodes)
        if self.mig_config:
            state.labels[MIG_CONFIG_LABEL] = self.mig_config
            state.labels[MIG_STATE_LABEL] = "success"
        return state

    def node(self, i: int) -> Node:
        name = f"{self.name}-{i}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }
        if self.instance_type:
            labels["node.kubernetes.io/instance-type"] = self.instance_type
        labels[POOL_LABEL] = self.name
        if self.zones:
            labels[ZONE_LABEL] = self.zones[i % len(self.zones)]
        capacity = dict(self.resources)
        devices: dict[str, list[str]] = {}
        numa: dict[str, int] = {}
        raw: dict[str, Any] = {"nodePool": copy.deepcopy(self.spec)}
        if self.model is not None and self.gpus:
            state = self.gpu_state(name)
            labels.update(state.labels)
            if self.dra is None:  # a DRA pool's GPUs are ResourceSlices, not extended resources
                capacity.update(state.capacity)
                devices, numa = state.devices, state.numa
                if state.warnings:
                    raw["warnings"] = list(state.warnings)
        labels.update(self.user_labels)
        # the kubelet's node allocatable: capacity less what is reserved for the system, not below 0
        allocatable = {r: max(v - self.reserved.get(r, 0), 0) for r, v in capacity.items()}
        return Node(
            name=name,
            labels=labels,
            taints=list(self.taints),
            capacity=capacity,
            allocatable=allocatable,
            pool=self.name,
            devices=devices,
            device_numa=numa,
            topology_manager_policy=self.topology_policy,
            raw=raw,
        )


def node_from_manifest(raw: dict[str, Any]) -> Node:
    """Parse a plain ``v1 Node`` document into a ``Node`` record.

    Quantities are read the way the scheduler reads them (cpu in millicores,
    everything else in whole units, rounded up). A missing ``allocatable``
    means the same as capacity, and ``pods`` defaults to 110, the kubelet's
    ``maxPods`` default, so hand-written nodes do not need the boilerplate.
    """
    if not isinstance(raw, dict):
        raise GpuLabError("Node: the document must be a mapping")
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name")
    if not name:
        raise GpuLabError("Node: metadata.name: Required value")

    def fail(field: str, message: str):
        raise GpuLabError(f'Node "{name}": {field}: {message}')

    if raw.get("kind", "Node") != "Node" or raw.get("apiVersion", "v1") != "v1":
        fail("kind", f'expected v1 Node, got {raw.get("apiVersion")} {raw.get("kind")}')
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    for field, given, go_type in (("spec", spec, "NodeSpec"), ("status", status, "NodeStatus")):
        if not isinstance(given, dict):
            raise GpuLabError(f'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal '
                              f"{_json_kind(given)} into Go struct field Node.{field} of type v1.{go_type}")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        fail("metadata.annotations", "values must be strings")
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        fail("spec.unschedulable", f"Invalid value: {unschedulable!r}: must be true or false")
    capacity = _resources(status.get("capacity"), "status.capacity", fail)
    if status.get("allocatable") is None:
        allocatable = dict(capacity)
    else:
        allocatable = _resources(status.get("allocatable"), "status.allocatable", fail)
    capacity.setdefault("pods", DEFAULT_PODS)
    allocatable.setdefault("pods", DEFAULT_PODS)
    labels = _labels(meta.get("labels"), "metadata.labels", fail)
    # The kubelet always sets these; spreading and anti-affinity by hostname rely on it.
    labels.setdefault("kubernetes.io/hostname", str(name))
    labels.setdefault("kubernetes.io/os", "linux")
    return Node(
        name=str(name),
        labels=labels,
        annotations=dict(annotations),
        taints=_taints(spec.get("taints"), "spec.taints", fail),
        unschedulable=unschedulable,
        capacity=capacity,
        allocatable=allocatable,
        raw=raw,
    )


def _json_kind(value: Any) -> str:
    """How encoding/json names a JSON value in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _resources(raw: Any, where: str, fail) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        fail(where, "must be a mapping of resource name to quantity")
    out: dict[str, int] = {}
    for res, amount in raw.items():
        field = f"{where}[{res}]"
        try:
            q = parse_quantity(amount)
        except QuantityError as err:
            fail(field, str(err))
        if q < 0:
            fail(field, f'Invalid value: "{amount}": must be greater than or equal to 0')
        if is_extended_resource(res) and q.denominator != 1:
            fail(field, f'Invalid value: "{amount}": must be an integer')
        out[res] = min(milli_value(q) if res == "cpu" else value(q), 2**63 - 1)  # ParseQuantity's cap
    return out


def _labels(raw: Any, where: str, fail) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        fail(where, "must be a mapping of label key to value")
    bad = False  # NodePool's fail records and raises _Stop: check every label; Node's raises
    for key, val in raw.items():
        try:
            _check_label_key(key, where, fail)
        except _Stop:
            bad = True
        try:
            if not isinstance(val, str):
                fail(f"{where}[{key}]", f"Invalid value: {val!r}: must be a string (quote it in YAML)")
            if len(val) > 63 or (val and not re.fullmatch(_LABEL_NAME, val)):
                fail(f"{where}[{key}]", f'Invalid value: "{val}": a valid label value must be no more '
                     f"than 63 characters and {_LABEL_MSG}")
        except _Stop:
            bad = True
    if bad:
        raise _Stop
    return dict(raw)


def _check_label_key(key: Any, where: str, fail) -> None:
    if not isinstance(key, str):
        fail(where, f"Invalid value: {key!r}: label keys must be strings")
    prefix, _, name = key.rpartition("/")
    if "/" in key and (len(prefix) > 253 or not re.fullmatch(_DNS1123_SUBDOMAIN, prefix)):
        fail(where, f'Invalid value: "{key}": prefix part must be a lowercase RFC 1123 subdomain')
    if len(name) > 63 or not re.fullmatch(_LABEL_NAME, name):
        fail(where, f'Invalid value: "{key}": name part must be no more than 63 characters and {_LABEL_MSG}')


def _taints(raw: Any, where: str, fail) -> list[Taint]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        fail(where, "must be a list of {key, value, effect}")
    taints: list[Taint] = []
    seen: set[tuple[str, str]] = set()
    bad = False  # NodePool's fail records and raises _Stop: check every taint; Node's raises

    def key_ok(at: str, key: Any) -> None:
        if not key:
            fail(f"{at}.key", "Required value")
        _check_label_key(key, f"{at}.key", fail)

    def value_ok(at: str, val: Any) -> None:
        if not isinstance(val, str):
            fail(f"{at}.value", f"Invalid value: {val!r}: must be a string (quote it in YAML)")
        if val and (len(val) > 63 or not re.fullmatch(_LABEL_NAME, val)):
            fail(f"{at}.value", f'Invalid value: "{val}": a valid label value must be no more than '
                 f"63 characters and {_LABEL_MSG}")

    def effect_ok(at: str, effect: Any) -> None:
        if not effect:
            fail(f"{at}.effect", "Required value")
        if effect not in TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
            fail(f"{at}.effect", f'Unsupported value: "{effect}": supported values: {supported}')

    for i, t in enumerate(raw):
        at = f"{where}[{i}]"
        try:
            if not isinstance(t, dict):
                fail(at, "must be a mapping with key, value and effect")
        except _Stop:
            bad = True
            continue
        key, val, effect = t.get("key"), t.get("value", ""), t.get("effect")
        ok = True
        for part_ok, arg in ((key_ok, key), (value_ok, val), (effect_ok, effect)):
            try:
                part_ok(at, arg)
            except _Stop:
                ok, bad = False, True
        if not ok:
            continue
        try:
            if (key, effect) in seen:
                fail(at, f'Duplicate value: "{key}:{effect}": taints must be unique by key and effect pair')
        except _Stop:
            bad = True
            continue
        seen.add((key, effect))
        taints.append(Taint(key, val, effect))
    if bad:
        raise _Stop
    return taints

