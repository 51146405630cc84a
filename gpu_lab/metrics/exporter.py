"""Declared GPU use as the Prometheus text NVIDIA's dcgm-exporter serves on ``:9400/metrics``.

Pinned to dcgm-exporter release ``4.5.3-4.8.2`` (github.com/NVIDIA/dcgm-exporter);
what each piece follows there:

* Metric names, types and ``# HELP`` text: ``etc/dcp-metrics-included.csv``
  (``DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).``;
  ``DCGM_FI_DEV_FB_FREE`` / ``DCGM_FI_DEV_FB_USED``, gauge, MiB;
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is
  active.``; ``DCGM_FI_DRIVER_VERSION, label``: a label on every series, not a metric).
* The line layout: ``internal/pkg/rendermetrics/render_metrics.go``
  (``gpuMetricsFormat``): ``# HELP``, ``# TYPE``, then
  ``NAME{gpu="0",UUID="GPU-...",pci_bus_id="...",device="nvidia0",modelName="...",``
  ``[GPU_I_PROFILE="1g.10gb",GPU_I_ID="..",]Hostname="<node>"`` then the label
  fields (``DCGM_FI_DRIVER_VERSION``) then the pod attributes, each group in
  key order as Go templates range over maps: ``container``, ``namespace``, ``pod``.
  ``UUID`` is spelled ``uuid`` only under ``--use-old-namespace``
  (``internal/pkg/collector/gpu_collector.go``). On main after that release
  (commit d5e5f51, "Rename Hostname label to hostname", May 2026) the label is
  ``hostname``; pass ``hostname_label="hostname"`` for that.
* Values: integer fields print as ``%d`` and doubles as ``%f`` (``toString`` in
  ``gpu_collector.go``), so a ratio prints ``0.350000``.
* ``modelName`` is the NVML device name (``Identifiers.Model``) with its blanks,
  e.g. ``NVIDIA H100 80GB HBM3``; ``--replace-blanks-in-model-name`` turns blanks
  into ``-``, which is GFD's ``nvidia.com/gpu.product`` (``replace_blanks=True``).
* ``Hostname`` is the ``NODE_NAME`` environment variable the Helm chart's
  DaemonSet sets from ``spec.nodeName`` (``internal/pkg/hostname/hostname.go``).
* Pod labels (``internal/pkg/transformation/kubernetes.go``, ``const.go``):
  ``pod``, ``namespace``, ``container`` from the kubelet's pod-resources API,
  keyed by device ID; ``pod_name``/``pod_namespace``/``container_name`` only
  with ``--use-old-namespace``; ``pod_uid`` only with
  ``--kubernetes-enable-pod-uid``. A GPU no pod holds keeps its series without
  pod labels. Time-slicing IDs ``GPU-<uuid>::<n>`` map the GPU's UUID to a pod
  and the last pod listed wins, so by default a shared GPU shows one pod (here:
  the last one in the input); one series per sharing pod needs
  ``--kubernetes-virtual-gpus``, which this model does not render.
* MIG: one series per GPU instance with ``GPU_I_PROFILE``/``GPU_I_ID``, the
  parent's ``gpu``/``UUID``, and the pod holding ``MIG-<uuid>``. NVML reports
  no utilisation for MIG devices, so DCGM leaves ``DCGM_FI_DEV_GPU_UTIL``
  blank and the exporter skips it: only ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
  shows how busy an instance is. (The parent GPU's own device-level series are
  left out here.)

Modelled, not measured: utilisation and framebuffer come from the pods'
declarations; the engine-active ratio is utilisation / 100; FB_FREE is total
less used (DCGM also keeps ``FB_RESERVED`` apart, a few hundred MiB, left at
0); ``pci_bus_id`` is a made-up but well-formed ``00000000:<bus>:00.0``; counter
families are printed in the CSV's order (the exporter ranges over a map there,
so its order varies between scrapes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import GpuLabError
from .records import (
    GpuNode,
    GpuUse,
    check,
    device_memory_mib,
    gpu_model,
    physical_uuid,
    uuid_of,
)

EXPORTER_RELEASE = "4.5.3-4.8.2"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_USED = "DCGM_FI_DEV_FB_USED"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DRIVER_VERSION = "DCGM_FI_DRIVER_VERSION"
# (name, Prometheus type, help) in etc/dcp-metrics-included.csv order.
FIELDS = (
    (GPU_UTIL, "gauge", "GPU utilization (in %)."),
    (FB_FREE, "gauge", "Framebuffer memory free (in MiB)."),
    (FB_USED, "gauge", "Framebuffer memory used (in MiB)."),
    (GR_ENGINE_ACTIVE, "gauge", "Ratio of time the graphics engine is active."),
)
# NVML device names of the catalog's models: the product label with its blanks back
# (catalog.py: product = NVML name with spaces turned into "-"); the blanks are not
# recoverable from the label, hence the table.
NVML_NAMES = {
    "T4": "Tesla T4",
    "A10G": "NVIDIA A10G",
    "L4": "NVIDIA L4",
    "L40S": "NVIDIA L40S",
    "A100-40GB": "NVIDIA A100-SXM4-40GB",
    "A100-80GB": "NVIDIA A100-SXM4-80GB",
    "H100-80GB": "NVIDIA H100 80GB HBM3",
    "H200-141GB": "NVIDIA H200",
}


@dataclass
class _Entity:
    """One GPU or MIG instance as the exporter reports it."""

    node: str
    gpu: int
    uuid: str
    model: str
    total_mib: int
    mig: tuple[str, int] | None = None  # (profile, GPU instance ID)
    uses: list[GpuUse] = field(default_factory=list)


def model_name(model: str, replace_blanks: bool = False) -> str:
    m = gpu_model(model)
    return m.product if replace_blanks else NVML_NAMES.get(m.name, m.product.replace("-", " "))


def _entities(uses: list[GpuUse], nodes: Iterable[GpuNode]) -> list[_Entity]:
    by_gpu: dict[tuple[str, int], list[GpuUse]] = {}
    order: list[str] = []
    models: dict[tuple[str, int], str] = {}
    mig_nodes = set()
    for n in nodes:
        if isinstance(n.gpus, bool) or not isinstance(n.gpus, int) or n.gpus < 0:
            raise GpuLabError(f"node {n.name}: gpus must be a non-negative integer, got {n.gpus!r}")
        gpu_model(n.model)
        order.append(n.name)
        if n.mig:
            mig_nodes.add(n.name)
        for g in range(n.gpus):
            by_gpu.setdefault((n.name, g), [])
            models[(n.name, g)] = n.model
    for u in uses:
        if u.node not in order:
            order.append(u.node)
        by_gpu.setdefault((u.node, u.gpu), []).append(u)
        models[(u.node, u.gpu)] = u.model
    out: list[_Entity] = []
    for key in sorted(by_gpu, key=lambda k: (order.index(k[0]), k[1])):
        node, gpu = key
        held = by_gpu[key]
        migs = [u for u in held if u.sharing == "mig"]
        if not migs and node in mig_nodes and not held:
            continue  # MIG on, no instance held: DCGM reports no whole-GPU use for it
        if not migs:
            uuid = physical_uuid(held[-1]) if held else uuid_of(node, gpu)
            model = models[key]
            out.append(_Entity(node, gpu, uuid, model, gpu_model(model).memory_mib, None, held))
            continue
        # MIG: one entity per instance (device ID), numbered in input order when no GI ID is given.
        instances: dict[str, _Entity] = {}
        for u in migs:
            dev = u.device_id.split("::", 1)[0]
            if dev not in instances:
                assert u.mig_profile is not None  # check() refused a MIG use without one
                gi = u.gpu_instance_id if u.gpu_instance_id is not None else len(instances) + 1
                instances[dev] = _Entity(node, gpu, physical_uuid(u), u.model, device_memory_mib(u),
                                         (u.mig_profile, gi))
            instances[dev].uses.append(u)
        out.extend(sorted(instances.values(), key=_instance_id))
    return out


def _instance_id(e: _Entity) -> int:
    assert e.mig is not None  # a MIG instance's entity, built with (profile, GI ID)
    return e.mig[1]


def _values(e: _Entity) -> dict[str, str]:
    """The entity's field values as the exporter prints them; a blank field is left out."""
    utils = [u.utilization for u in e.uses if u.utilization is not None]
    mems = [u.memory_mib for u in e.uses if u.memory_mib is not None]
    vals: dict[str, str] = {}
    if len(utils) == len(e.uses):  # every use declared it
        # Time-sliced pods take turns: the GPU is busy for the sum of their busy times, at most all of it.
        util = min(100.0, sum(utils))
        if e.mig is None:
            vals[GPU_UTIL] = f"{round(util):d}"
        vals[GR_ENGINE_ACTIVE] = f"{util / 100:f}"
    if len(mems) == len(e.uses):
        used = min(e.total_mib, round(sum(mems)))
        vals[FB_FREE] = f"{e.total_mib - used:d}"
        vals[FB_USED] = f"{used:d}"
    return vals


def _labels(e: _Entity, replace_blanks: bool, driver_version: str | None,
            hostname_label: str) -> str:
    parts = [f'gpu="{e.gpu}"', f'UUID="{e.uuid}"', f'pci_bus_id="00000000:{e.gpu + 1:02X}:00.0"',
             f'device="nvidia{e.gpu}"', f'modelName="{model_name(e.model, replace_blanks)}"']
    if e.mig is not None:
        parts += [f'GPU_I_PROFILE="{e.mig[0]}"', f'GPU_I_ID="{e.mig[1]}"']
    parts.append(f'{hostname_label}="{e.node}"')
    if driver_version:
        parts.append(f'{DRIVER_VERSION}="{driver_version}"')
    if e.uses:
        # The device-to-pod map keeps the last pod written for a UUID.
        u = e.uses[-1]
        parts += [f'container="{u.container}"', f'namespace="{u.namespace}"', f'pod="{u.pod}"']
    return ",".join(parts)


def dcgm_text(uses: Iterable[GpuUse], nodes: Iterable[GpuNode] = (), *,
              driver_version: str | None = None, profiling: bool = True,
              replace_blanks: bool = False, hostname_label: str = "Hostname") -> str:
    """The ``/metrics`` text of dcgm-exporter with Kubernetes pod mapping, for these holds.

    ``nodes`` adds every GPU of each node, so GPUs no pod holds appear (0 %,
    all framebuffer free, no pod labels; on a ``mig`` node nothing, as its
    instances are not listed). ``driver_version`` adds the
    ``DCGM_FI_DRIVER_VERSION`` label; ``profiling=False`` drops
    ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (GPUs without DCGM profiling, e.g. T4 in
    some setups). See the module docstring for each fact's source.
    """
    if hostname_label not in ("Hostname", "hostname"):
        raise GpuLabError(f'hostname_label must be "Hostname" (release {EXPORTER_RELEASE}) '
                          'or "hostname" (main)')
    entities = _entities([check(u) for u in uses], list(nodes))
    values = [(e, _values(e), _labels(e, replace_blanks, driver_version, hostname_label)) for e in entities]
    out = []
    for name, kind, help_text in FIELDS:
        if name == GR_ENGINE_ACTIVE and not profiling:
            continue
        lines = [f"{name}{{{labels}}} {vals[name]}" for _, vals, labels in values if name in vals]
        if lines:
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n" + "\n".join(lines) + "\n")
    return "".join(out)
