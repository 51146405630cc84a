"""Distributed training, modelled explicitly: a rendezvous Job progresses only when all its workers run.

A Job annotated ``gpulab.dev/rendezvous: "true"`` is a torchrun-style job: each
of its ``parallelism`` workers blocks in the rendezvous until all have joined.
Until then the running workers hold their GPUs doing nothing ("stranded"); once
all run, the Job's work (the pods' ``gpulab.dev/duration``) advances, and when it
is done every worker succeeds together. If a worker leaves (preempted, evicted),
the others block again and the work pauses (as if resumed from a checkpoint).

``gpulab.dev/rendezvous-timeout``: workers that waited that long fail, as a
rendezvous that times out does, and the Job controller retries them (each failed
pod counts against ``backoffLimit``, exactly as in Kubernetes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..model.timing import RENDEZVOUS_TIMEOUT

TIMEOUT_REASON = "Error"  # the container exits non-zero: the kubelet's reason


@dataclass
class Group:
    job: str
    size: int
    work: float | None  # seconds of work left once all run; None = runs until stopped
    timeout: float | None
    running: dict[str, int] = field(default_factory=dict)  # pod key -> GPUs it holds
    progressing_since: float | None = None
    waiting_since: dict[str, float] = field(default_factory=dict)  # pod -> joined the rendezvous


class Rendezvous:
    """The rendezvous groups of a session. The session passes callbacks to end pods."""

    def __init__(self, finish_at: Callable[[str, float], None], cancel_finish: Callable[[str], None],
                 fail: Callable[[str, str, str], None], wake_at: Callable[[float, str], object]) -> None:
        self._finish_at, self._cancel, self._fail, self._wake_at = finish_at, cancel_finish, fail, wake_at
        self.groups: dict[str, Group] = {}
        self.stranded_gpus = 0
        self.stranded_s: dict[str, float] = {}  # pod -> seconds it held GPUs idle

    def register(self, job: str, size: int, work: float | None, timeout: float | None) -> None:
        self.groups[job] = Group(job, size, work, timeout)

    def pod_started(self, job: str, pod: str, gpus: int, now: float) -> None:
        g = self.groups[job]
        g.running[pod] = gpus
        if g.progressing_since is not None:  # cannot happen: a full group has no room
            return
        if len(g.running) >= g.size:
            self._start(g, now)
        else:
            g.waiting_since[pod] = now
            self.stranded_gpus += gpus
            if g.timeout is not None:
                self._wake_at(now + g.timeout, job)

    def pod_stopped(self, job: str, pod: str, now: float) -> None:
        g = self.groups[job]
        gpus = g.running.pop(pod, None)
        if gpus is None:
            return
        if g.progressing_since is not None:
            if g.work is not None:
                g.work = max(0.0, g.work - (now - g.progressing_since))
            g.progressing_since = None
            if g.work == 0:
                return  # the group is finishing together at this instant
            for other in g.running:  # the others block in the rendezvous again
                self._cancel(other)
                g.waiting_since[other] = now
                self.stranded_gpus += g.running[other]
                if g.timeout is not None:
                    self._wake_at(now + g.timeout, job)
        else:
            self._stop_waiting(g, pod, gpus, now)

    def wake(self, job: str, now: float) -> None:
        """A rendezvous timeout may have run out: fail the workers that waited that long."""
        g = self.groups.get(job)
        if g is None or g.timeout is None or g.progressing_since is not None:
            return
        expired = [p for p, since in g.waiting_since.items() if now - since >= g.timeout - 1e-9]
        if not expired:
            return
        joined = len(g.running)
        message = (f"rendezvous timed out after {g.timeout:g}s: {joined} of {g.size} workers joined "
                   f"({RENDEZVOUS_TIMEOUT})")
        for pod in list(g.running):
            self._fail(pod, TIMEOUT_REASON, message)

    def _start(self, g: Group, now: float) -> None:
        for pod, since in g.waiting_since.items():
            self.stranded_s[pod] = self.stranded_s.get(pod, 0.0) + now - since
            self.stranded_gpus -= g.running.get(pod, 0)
        g.waiting_since.clear()
        g.progressing_since = now
        if g.work is not None:
            for pod in g.running:
                self._finish_at(pod, now + g.work)

    def _stop_waiting(self, g: Group, pod: str, gpus: int, now: float) -> None:
        since = g.waiting_since.pop(pod, None)
        if since is not None:
            self.stranded_s[pod] = self.stranded_s.get(pod, 0.0) + now - since
            self.stranded_gpus -= gpus

    def stranded_now(self, job: str, pod: str, now: float) -> float:
        """Seconds ``pod`` has held GPUs idle so far (including a wait still going on)."""
        total = self.stranded_s.get(pod, 0.0)
        g = self.groups.get(job)
        if g is not None and pod in g.waiting_since:
            total += now - g.waiting_since[pod]
        return total
