"""What a node costs per hour: its pool's ``spec.pricePerHour``, else its GPUs at catalog prices."""

from __future__ import annotations

import re
from typing import Any

from ..errors import GpuLabError
from .catalog import GpuModel, get_model

PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"


def model_of_product(product: Any) -> GpuModel | None:
    """The catalog model of an ``nvidia.com/gpu.product`` value, or None when unknown.

    GFD appends ``-SHARED`` (time-slicing) or ``-MIG-<profile>`` (single strategy)
    to the product; the price is the physical GPU's.
    """
    if not isinstance(product, str) or not product:
        return None
    name = re.sub(r"-MIG-.*$", "", product)
    name = re.sub(r"-SHARED$", "", name)
    try:
        return get_model(name)
    except GpuLabError:
        return None


def physical_gpus(labels: dict[str, str], capacity: dict[str, int]) -> int:
    """Physical GPUs on a node: ``nvidia.com/gpu.count`` (MIG or not), else whole-GPU capacity."""
    try:
        return int(labels[COUNT_LABEL])
    except (KeyError, ValueError):
        return int(capacity.get("nvidia.com/gpu", 0))


def node_price_per_hour(labels: dict[str, str], capacity: dict[str, int],
                        pool_spec: dict | None = None) -> float | None:
    """USD per hour: ``spec.pricePerHour`` of the node's pool when set, else physical GPUs x
    the catalog's on-demand price per GPU-hour; 0 for a node without GPUs; None when the
    GPU model is not in the catalog."""
    price = (pool_spec or {}).get("pricePerHour")
    if isinstance(price, (int, float)) and not isinstance(price, bool):
        return float(price)
    gpus = physical_gpus(labels, capacity)
    if not gpus:
        return 0.0
    model = model_of_product(labels.get(PRODUCT_LABEL))
    return gpus * model.price_per_hour if model else None
