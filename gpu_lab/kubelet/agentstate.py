"""What a running node agent publishes about itself: ``WORK_DIR/agents/<pid>-<n>.json``,
kept fresh (about every second) so that ``gpu-lab status``, another process, can show the
agent and its device plugins with their health (``agentprocess.assess``)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..processes import start_time

if TYPE_CHECKING:  # the node (gRPC) is not needed to read or write a state file
    from .node import AgentNode

log = logging.getLogger("gpu_lab.nodeagent")

AGENTS_DIR = "agents"
STATE_WRITE_S = 1.0


def agent_state_files(work_dir: Path | str) -> list[Path]:
    """The state files of the node agents that use ``work_dir`` (live or left behind)."""
    return sorted((Path(work_dir) / AGENTS_DIR).glob("*.json"))


def state_document(nodes: Iterable[AgentNode], ready: bool) -> dict[str, Any]:
    """This process's pid, a heartbeat, and each node's plugin pid and state."""
    out = {}
    for sn in nodes:
        if sn.retired:  # its Node was deleted: no longer this agent's
            continue
        plugin = sn.plugin if sn.has_plugin else None
        out[sn.name] = {
            "plugin": plugin is not None,
            "plugin_pid": plugin.pid if plugin is not None and plugin.alive else None,
            "plugin_starts": plugin.starts if plugin is not None else 0,
            "serving": bool(plugin is not None and sn.plugin_serving()),
            "log": str(plugin.log_path) if plugin is not None else None,
            "static": sn.static_reason or None if plugin is None else None,
        }
    return {
        "pid": os.getpid(),
        "start_time": start_time(os.getpid()),
        "argv": sys.argv[:3],
        "ready": ready,
        "heartbeat": time.time(),
        "nodes": out,
    }


def write_state(path: Path, doc: dict[str, Any]) -> bool:
    """Replace ``path`` with ``doc`` atomically; False (logged) when it cannot be written:
    status only, never a reason to stop the agent."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as err:
        log.debug("cannot write %s: %s", path, err)
        return False
    return True
