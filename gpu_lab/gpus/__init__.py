"""``gpu_lab.gpus``: the GPU facts lessons and labs compute with.

The catalog (models, memory, interconnects, reference prices with sources), a node's
NUMA layout and NVIDIA's preferred GPUs (``topology``), MIG geometry (profiles,
valid layouts, NVIDIA's predefined mig-parted configs), the MIG planner, and the
time-slicing/MPS contention model (a model, not a measurement: see ``sharing``).
Names load on first use so the device-plugin process, which imports submodules of
this package, starts without numpy.
"""

from __future__ import annotations

from ..lazy import lazy_getattr
from .catalog import MODELS

_PUBLIC = {
    # catalog
    "GpuModel": ("catalog", "GpuModel"),
    "get_model": ("catalog", "get_model"),
    "MODELS": ("catalog", "MODELS"),
    "Interconnect": ("catalog", "Interconnect"),
    # inside a node: gpu-lab's NUMA model and NVIDIA's best-effort choice of GPUs
    "gpu_numa": ("topology", "gpu_numa"),
    "preferred_gpus": ("topology", "best_effort"),
    # MIG geometry
    "MigProfile": ("mig", "MigProfile"),
    "Placement": ("mig", "Placement"),
    "ImpossibleLayout": ("mig", "ImpossibleLayout"),
    "mig_profiles": ("mig", "profiles"),
    "validate_mig_layout": ("mig", "validate_layout"),
    "mig_layouts": ("mig", "all_layouts"),
    "maximal_mig_layouts": ("mig", "maximal_layouts"),
    "mig_capable_models": ("mig", "mig_capable_models"),
    "gpu_uuids": ("labels", "gpu_uuids"),
    "predefined_mig_configs": ("migparted", "predefined_names"),
    # MIG planner
    "Service": ("planner", "Service"),
    "MigPlan": ("planner", "MigPlan"),
    "plan_mig": ("planner", "plan"),
    "smallest_mig_profile": ("planner", "smallest_profile"),
    # sharing: NVIDIA's advertising rules and the contention model
    "efficiency": ("sharing", "efficiency"),
    "timeslice_throughput": ("sharing", "timeslice_throughput"),
    "timeslice_latency": ("sharing", "timeslice_latency"),
    "timeslice_memory": ("sharing", "timeslice_memory"),
    "mps_share": ("sharing", "mps_share"),
    "mps_throughput": ("sharing", "mps_throughput"),
    "mps_latency": ("sharing", "mps_latency"),
    "mps_memory": ("sharing", "mps_memory"),
}

__all__ = sorted([*_PUBLIC, "models"])


def models() -> list:
    """Every catalogued GPU model, smallest memory first."""
    return sorted(MODELS.values(), key=lambda m: (m.memory_mib, m.name))


__getattr__ = lazy_getattr(__name__, _PUBLIC, "gpu_lab.gpus")
