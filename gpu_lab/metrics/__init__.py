"""``gpu_lab.metrics``: per-pod GPU utilisation and waste, and the same in DCGM exporter's names.

Pods declare their use with ``gpulab.dev/gpu-utilization`` (percent busy) and
``gpulab.dev/gpu-memory`` (a quantity per GPU). From ``GpuUse`` records (one per
container and device; ``gpu_uses(lab, manifests)`` reads them off a session,
``gpu_nodes(lab)`` its GPU inventory):

* ``utilisation(uses)``: a DataFrame, one row per (pod, GPU), and ``waste(...)``
  per pod (GPU-hours requested, used, wasted, and the dollars wasted);
* ``dcgm_text(uses, nodes)``: the Prometheus text dcgm-exporter serves
  (``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``/``FB_FREE``,
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` with ``pod``/``namespace``/``container``);
* ``right_size(uses)``: whole GPUs for light inference pods, against
  time-slicing and MIG sized with ``gpu_lab.gpus``.
"""

from __future__ import annotations

from .annotations import MEMORY_ANNOTATION, UTILIZATION_ANNOTATION, Declared, declared
from .collect import gpu_nodes, gpu_uses
from .exporter import EXPORTER_RELEASE, FIELDS, dcgm_text
from .records import GpuNode, GpuUse
from .sizing import Sizing, right_size
from .utilisation import utilisation, waste

__all__ = [
    "EXPORTER_RELEASE",
    "FIELDS",
    "MEMORY_ANNOTATION",
    "UTILIZATION_ANNOTATION",
    "Declared",
    "GpuNode",
    "GpuUse",
    "Sizing",
    "dcgm_text",
    "declared",
    "gpu_nodes",
    "gpu_uses",
    "right_size",
    "utilisation",
    "waste",
]
