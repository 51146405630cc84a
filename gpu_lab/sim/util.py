"""What kube-scheduler's ``pkg/scheduler/util`` gives the plugins that several of them use.
"""

from __future__ import annotations

from ..model.objects import Pod


def more_important_key(pod: Pod) -> tuple[int, int]:
    """Sort key for ``MoreImportantVictim`` on single pods: higher priority, then earlier start."""
    return (-pod.priority, pod.created)


__all__ = ["more_important_key"]
