"""The API server's validation of the pod fields the scheduler reads, in its words.

Each check mirrors a function of ``pkg/apis/core/validation`` (Kubernetes
v1.37) or apimachinery's name and label rules, and returns error strings
shaped like ``field.Error.Error()``: ``<path>: <type>[: <value>][: <detail>]``.
Callers collect every error of an object before raising, as the API server
does, so a learner sees all problems of a manifest at once.

Go iterates maps in random order; we keep the manifest's order instead, so
messages are reproducible.

The checks live in one module per concern (errors, names, quantities, resources,
selectors, affinity, tolerations, spread, ports, pod); this package offers them all
under one name, as callers use it: ``from gpu_lab.model import validation as v``.
"""

from __future__ import annotations

from .affinity import (  # noqa: F401
    PREFERRED,
    REQUIRED,
    validate_affinity,
)
from .errors import (  # noqa: F401
    decode_error,
    dedupe,
    duplicate,
    forbidden,
    go_struct,
    go_value,
    invalid,
    not_supported,
    required,
    selector_value,
    wrong_type,
)
from .names import (  # noqa: F401
    DNS1123_LABEL_FMT,
    DNS1123_SUBDOMAIN_FMT,
    LABEL_KEY_FMT,
    LABEL_VALUE_FMT,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    regex_error,
    validate_name,
)
from .pod import (  # noqa: F401
    RESTART_POLICIES,
    validate_object_meta,
    validate_owner_references,
    validate_pod_spec,
)
from .ports import (  # noqa: F401
    PROTOCOLS,
    host_port_conflicts,
    validate_ports,
)
from .quantities import (  # noqa: F401
    parse,
    quantity_string,
    quantity_text,
)
from .resources import (  # noqa: F401
    STANDARD_CONTAINER_RESOURCES,
    is_extended,
    is_hugepages,
    is_native,
    overcommit_allowed,
    validate_container_resource_name,
    validate_quantity_value,
    validate_resource_requirements,
)
from .selectors import (  # noqa: F401
    validate_annotations,
    validate_label_selector,
    validate_labels,
    validate_node_selector_term,
)
from .spread import (  # noqa: F401
    WHEN_UNSATISFIABLE,
    validate_topology_spread,
)
from .tolerations import (  # noqa: F401
    validate_tolerations,
)
