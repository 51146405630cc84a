"""``gpu_lab.charts``: Altair charts of what a session shows, for lessons and labs.

Every chart reads only the public ``Session`` calls (``nodes()``, ``pods()``,
``explain()``, ``describe_node()``) and ``gpu_lab.gpus``, so the same cell draws
the same picture on the simulator, a local control plane or a real cluster.
Data is always inlined in the chart: nothing is fetched when it renders, and
``save`` writes PNG/SVG offline through vl-convert. Importing this package makes
Altair render charts as inline SVG (``export.offline_renderer``) for the same reason.

The flow diagrams (``framework``, ``request_flow``, ``gang_admission``, ``dra_objects``,
``gpu_operator``)
read nothing: each is a fixed, self-contained SVG of how Kubernetes works, shown inline by
Jupyter and kept by ``gpu-lab edition``'s HTML.
"""

from __future__ import annotations

from .autoscaling import cost_comparison, nodes_over_time, run_costs
from .contention import contention
from .cost import cost, fleet_cost
from .diagrams import dra_objects, framework, gang_admission, gpu_operator, request_flow
from .export import save, use_offline_renderer
from .fragmentation import fragmentation
from .mig import mig_layout, mig_profiles
from .numa import numa_layout
from .occupancy import occupancy
from .scores import scores
from .timeline import timeline
from .utilisation import utilisation
from .whatif import whatif
from .workshop import workshop

# Charts draw as inline SVG wherever a notebook shows them: no CDN, so they render offline.
use_offline_renderer()

__all__ = [
    "contention",
    "cost",
    "cost_comparison",
    "dra_objects",
    "fleet_cost",
    "fragmentation",
    "framework",
    "gang_admission",
    "gpu_operator",
    "mig_layout",
    "mig_profiles",
    "nodes_over_time",
    "numa_layout",
    "occupancy",
    "request_flow",
    "run_costs",
    "save",
    "scores",
    "timeline",
    "utilisation",
    "whatif",
    "workshop",
]
