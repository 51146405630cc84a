"""What the autoscaler asks of the engine, and the events it records, in the real tools' words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event: ``involved`` is ``Pod ns/name``, ``Node name`` or
    ``ConfigMap kube-system/cluster-autoscaler-status`` (cluster-autoscaler's
    LogRecorder), ``source`` the component that records it."""

    involved: str
    reason: str
    message: str
    type: str = "Normal"
    source: str = "cluster-autoscaler"


@dataclass(frozen=True)
class ScaleUp:
    """Add ``count`` nodes named ``nodes`` to ``pool``; they are Ready, GPUs advertised, at ``ready_at``.

    ``reason`` is ``TriggeredScaleUp`` (pending pods) or ``Underutilized/Replace``
    (a Karpenter replacement); ``pods`` are the keys of the pods it is for.
    """

    pool: str
    count: int
    nodes: tuple[str, ...]
    ready_at: float
    reason: str
    message: str
    pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScaleDown:
    """Remove ``node`` now: evict the pods in ``evict`` (their controllers recreate them), then delete it.

    ``reason`` is cluster-autoscaler's event reason (``ScaleDownEmpty``,
    ``ScaleDown``) or Karpenter's disruption (``Empty/Delete``,
    ``Underutilized/Delete``, ``Underutilized/Replace``).
    """

    node: str
    pool: str
    reason: str
    message: str
    evict: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cordon:
    """Stop scheduling onto ``node`` (Karpenter's ``karpenter.sh/disrupted:NoSchedule`` taint)
    while its replacement comes up; a ``ScaleDown`` follows when it is Ready."""

    node: str
    reason: str
    message: str


Action = ScaleUp | ScaleDown | Cordon | Event
