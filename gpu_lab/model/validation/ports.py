"""Container ports and host port conflicts."""

from __future__ import annotations

from typing import Any

from .errors import duplicate, invalid, not_supported, required, wrong_type
from .selectors import _values

PROTOCOLS = ("SCTP", "TCP", "UDP")


def validate_ports(ports: Any, path: str) -> list[str]:
    """``validateContainerPorts`` (protocol already defaulted to TCP)."""
    if ports is None:
        return []
    if not isinstance(ports, list):
        return [wrong_type(path, ports, "a list")]
    errs = []
    for i, p in enumerate(ports):
        at = f"{path}[{i}]"
        if not isinstance(p, dict):
            errs.append(wrong_type(at, p, "a container port"))
            continue
        cp, hp = p.get("containerPort") or 0, p.get("hostPort") or 0
        if cp == 0:
            errs.append(required(f"{at}.containerPort"))
        elif isinstance(cp, bool) or not isinstance(cp, int) or not 1 <= cp <= 65535:
            errs.append(invalid(f"{at}.containerPort", cp, "must be between 1 and 65535, inclusive"))
        if hp and (isinstance(hp, bool) or not isinstance(hp, int) or not 1 <= hp <= 65535):
            errs.append(invalid(f"{at}.hostPort", hp, "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol") or ""
        if not proto:
            errs.append(required(f"{at}.protocol"))
        elif proto not in PROTOCOLS:
            errs.append(not_supported(f"{at}.protocol", proto, PROTOCOLS))
    return errs


def host_port_conflicts(containers: list, path: str) -> list[str]:
    """``checkHostPortConflicts``: one protocol/hostIP/hostPort per pod."""
    seen: set[str] = set()
    errs = []
    for ci, c in enumerate(containers):
        for pi, p in enumerate(_values(c.get("ports") if isinstance(c, dict) else None)):
            if not isinstance(p, dict) or not p.get("hostPort"):
                continue
            key = f"{p.get('protocol') or ''}/{p.get('hostIP') or ''}/{p['hostPort']}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return errs
