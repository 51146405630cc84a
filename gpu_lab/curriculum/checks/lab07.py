"""Lab 07 checks: the research team's nightly sweep; two of its three Jobs fail every night.

The cluster is fixed (``CLUSTER``: two H200 nodes, 16 GPUs). What the learner changes is the
submission: tonight's sweep (``SWEEP``: three torchrun-style rendezvous Jobs of 12 GPUs each,
3 workers of 4, whose workers give up after a 10-minute rendezvous timeout) plus whatever
objects decide how it is admitted and placed. The manifests live here, with their checks,
not in ``lessons/scenarios/``: the lesson's two-team deadlock is another cluster and another
ticket. The checks run the cluster and the submission through ``gpu_lab.simulate`` and say,
in numbers and names, which Job never finished and why, when the last one finished, and
which workers held GPUs for nothing.

The work itself may not change: each Job keeps its GPUs in total, its duration and its
submission time, and stays a rendezvous Job (``WORK``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

from ... import connect
from ...gpus import get_model
from ...model.duration import parse_duration
from ...simulation import simulate
from .feedback import Checklist, Feedback
from .manifests import hardware_problem, read_manifests

TITLE = "Lab 07"

HINTS = (
    "Start from the Jobs: `kubectl get jobs -n research` shows which failed, and `kubectl describe job -n "
    "research <job>` why (its conditions and events). Then watch the pods: `kubectl get pods -n research -o wide "
    "--watch` at 22:00 shows some workers of a Job Running while the others are Pending. A rendezvous Job "
    "trains only when all its workers run.",
    "A worker that waits longer than its rendezvous timeout fails, and every failure counts against the Job's "
    "backoffLimit. The timeout gives its GPUs back, but the next round is the same race: pods are placed one at "
    "a time, so a Job gets part of the GPUs again. More retries or no timeout trade failures for GPUs held for "
    "nothing. What would place a Job's workers all at once or not at all?",
    "Kubernetes v1.37 has gang scheduling in kube-scheduler: a PodGroup (scheduling.k8s.io/v1beta1) with "
    "schedulingPolicy.gang.minCount, which the Job's pods join through spec.schedulingGroup.podGroupName "
    "(`kubectl get podgroups -A` shows them). Kueue's admission is another way.",
    "The answer: for each of the three sweep Jobs, a PodGroup named after the Job in namespace research with "
    "spec.schedulingPolicy.gang.minCount = the Job's parallelism (3), and the Job's pod template "
    "spec.schedulingGroup = {podGroupName: <the Job's name>}. The Jobs then run one after the other, each "
    "whole; the timeout can stay.",
)
GPU = "nvidia.com/gpu"
HORIZON = "24h"  # how long each check runs the clock
RENDEZVOUS = "gpulab.dev/rendezvous"
DURATION = "gpulab.dev/duration"
SUBMIT_AT = "gpulab.dev/submit-at"
TIMEOUT = "gpulab.dev/rendezvous-timeout"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
CLUSTER_GPUS = 16
MODEL = "H200-141GB"

CLUSTER = """\
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h200}
spec:
  count: 2
  gpu: {model: H200-141GB, count: 8}
"""

# One sweep Job as the research team's pipeline writes it; SWEEP holds three of them.
_SWEEP_JOB = """\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: research
  annotations:
    gpulab.dev/rendezvous: "true"
    gpulab.dev/rendezvous-timeout: 10m
{submit_at}spec:
  parallelism: 3
  completions: 3
  backoffLimit: 4
  template:
    metadata:
      annotations:
        gpulab.dev/duration: {duration}
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: sweep-trainer:1.2     # torchrun --nnodes=3 --nproc-per-node=4
        resources:
          limits: {{nvidia.com/gpu: 4}}
"""

# Tonight's submission, exactly as the research team's pipeline applies it.
SWEEP = """\
# Lab 07: the research team's nightly sweep on the 16-GPU H200 cluster
# (CLUSTER), as submitted at 22:00. Three torchrun Jobs, each 3 workers
# of 4 GPUs: no worker trains until all three have joined (gpulab.dev/rendezvous). Each
# worker gives up after 10 minutes without its peers (torchrun --rdzv-timeout).
apiVersion: v1
kind: Namespace
metadata: {name: research}
""" + "".join(_SWEEP_JOB.format(name=name, duration=duration, submit_at=submit_at)
              for name, duration, submit_at in (
                  ("sweep-lr", "3h", ""),
                  ("sweep-wd", "2h", ""),
                  ("sweep-bs", "90m", "    gpulab.dev/submit-at: 5m\n")))

# The cluster is fixed: a submission may not bring capacity of its own.
HARDWARE_KINDS = ("NodePool", "Node")


@dataclass(frozen=True)
class Work:
    """What one sweep Job must still do, whatever its shape."""

    namespace: str
    name: str
    gpus: int  # in all: parallelism x GPUs per pod
    duration_s: float  # the pods' gpulab.dev/duration
    submit_at_s: float  # gpulab.dev/submit-at
    rendezvous: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


WORK = (
    Work("research", "sweep-lr", 12, 3 * 3600, 0, True),
    Work("research", "sweep-wd", 12, 2 * 3600, 0, True),
    Work("research", "sweep-bs", 12, 90 * 60, 5 * 60, True),
)
TRAINING = tuple(w for w in WORK if w.rendezvous)


# ------------------------------------------------------------------ reading input
def documents(submission: Any) -> list[dict]:
    """The submission as a list of manifests: YAML text, a path to a YAML file, a dict or a list."""
    return read_manifests(submission, TITLE)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.4g} h"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _gpus_per_pod(template: dict) -> int:
    total = 0
    for c in (template.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU, (res.get("requests") or {}).get(GPU, 0))
        with contextlib.suppress(TypeError, ValueError):  # the API server refuses these; simulate says why
            total += int(value)
    return total


def _job_shape(doc: dict) -> dict[str, Any]:
    """The parts of a Job that make up its work: GPUs, duration, submit time, rendezvous."""
    meta = doc.get("metadata") or {}
    ann = meta.get("annotations") or {}
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    t_ann = (template.get("metadata") or {}).get("annotations") or {}
    parallelism = spec.get("parallelism", 1)
    per_pod = _gpus_per_pod(template)
    duration = t_ann.get(DURATION)
    return {"parallelism": parallelism, "per_pod": per_pod,
            "gpus": parallelism * per_pod if isinstance(parallelism, int) else None,
            "duration_s": parse_duration(duration) if duration else None,
            "submit_at_s": parse_duration(ann[SUBMIT_AT]) if ann.get(SUBMIT_AT) else 0.0,
            "rendezvous": ann.get(RENDEZVOUS) == "true"}


def work_problems(submission: Any) -> list[str]:
    """What the submission changed about tonight's work (empty when it is the same work)."""
    docs = documents(submission)
    problems: list[str] = []
    hardware = hardware_problem(docs, HARDWARE_KINDS, f"the cluster is fixed at {CLUSTER_GPUS} GPUs (lab07.CLUSTER)")
    if hardware is not None:
        problems.append(hardware)
    jobs = {f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{(d.get('metadata') or {}).get('name')}": d
            for d in docs if d.get("kind") == "Job"}
    for w in WORK:
        doc = jobs.get(w.key)
        if doc is None:
            problems.append(f"Job {w.key} is missing: tonight's work still has to run")
            continue
        shape = _job_shape(doc)
        if shape["gpus"] != w.gpus:
            problems.append(f"{w.key} asks for {shape['gpus']} GPUs in all ({shape['parallelism']} pods x "
                            f"{shape['per_pod']}), tonight's asks for {w.gpus}: you may change the shape, "
                            "not the total")
        if shape["duration_s"] != w.duration_s:
            got = "none" if shape["duration_s"] is None else _hours(shape["duration_s"])
            problems.append(f"{w.key} runs {got} ({DURATION}), tonight's runs {_hours(w.duration_s)}")
        if shape["submit_at_s"] > w.submit_at_s:
            problems.append(f"{w.key} is submitted at {_hours(shape['submit_at_s'])}, tonight's at "
                            f"{_hours(w.submit_at_s)}: teams submit when they are ready, not later")
        if w.rendezvous and not shape["rendezvous"]:
            problems.append(f"{w.key} lost {RENDEZVOUS}: \"true\": the job still needs all of its workers "
                            "at once, the annotation only models that")
    return problems


def gang_notes(submission: Any) -> list[str]:
    """How the submission's PodGroups (the native gang API) fail to cover the training Jobs:
    a group no pod joins, pods naming a group that does not exist, a minCount below the
    number of workers the rendezvous needs. Empty when every training Job is a whole gang
    or none uses PodGroups."""
    docs = documents(submission)
    groups = {}
    for d in docs:
        if d.get("kind") == "PodGroup":
            meta = d.get("metadata") or {}
            gang = ((d.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
            groups[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = (
                gang.get("minCount") if isinstance(gang, dict) else None)
    jobs = {f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{(d.get('metadata') or {}).get('name')}": d
            for d in docs if d.get("kind") == "Job"}
    notes: list[str] = []
    joined: set[str] = set()
    for w in TRAINING:
        doc = jobs.get(w.key)
        if doc is None:
            continue
        spec = doc.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        name = (pod_spec.get("schedulingGroup") or {}).get("podGroupName")
        if not name:
            continue
        key = f"{w.namespace}/{name}"
        joined.add(key)
        workers = spec.get("parallelism", 1)
        if key not in groups:
            notes.append(f"{w.key}'s pods name PodGroup {name} (spec.schedulingGroup), which does not exist in "
                         f"namespace {w.namespace}: GangScheduling keeps them out of the scheduling queue until "
                         "it does, without a message")
        elif groups[key] is None:
            notes.append(f"PodGroup {key} has the basic policy: its pods are scheduled one by one; use "
                         f"gang: {{minCount: {workers}}}")
        elif isinstance(min_count := groups[key], int) and isinstance(workers, int) and min_count < workers:
            notes.append(f"PodGroup {key} has minCount {groups[key]}, but {w.key} needs all {workers} workers "
                         f"at once: the scheduler binds the group as soon as {groups[key]} fit")
    for key in groups:
        if key not in joined and key in {t.key for t in TRAINING}:
            notes.append(f"PodGroup {key} exists, but no pod of Job {key} joins it: set "
                         "spec.template.spec.schedulingGroup.podGroupName")
    return notes


def kueue_notes(submission: Any) -> list[str]:
    """Where a submission that uses Kueue lets quota and free GPUs differ: sweep Jobs left out
    of the queue (their GPUs are invisible to the quota) and a ClusterQueue quota above the
    cluster's 16 GPUs. Empty when no Job is queued."""
    docs = documents(submission)
    jobs = [d for d in docs if d.get("kind") == "Job"]
    labelled = {f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{(d.get('metadata') or {}).get('name')}"
                for d in jobs if ((d.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)}
    if not labelled:
        return []
    notes = []
    outside = [w for w in WORK if w.key not in labelled]
    if outside:
        listed = ", ".join(f"{w.key} ({w.gpus} GPUs)" for w in outside)
        notes.append(f"not in a LocalQueue (no {QUEUE_LABEL} label): {listed}; Kueue counts only queued "
                     "Jobs against the quota, so it admits a Job while GPUs it counts as free are still busy")
    total = 0
    for d in docs:
        if d.get("kind") != "ClusterQueue":
            continue
        for group in (d.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for r in flavor.get("resources") or []:
                    if r.get("name") == GPU:
                        with contextlib.suppress(TypeError, ValueError):
                            total += int(r.get("nominalQuota", 0))
    if total > CLUSTER_GPUS:
        notes.append(f"the ClusterQueues' {GPU} quota adds up to {total}, the cluster has {CLUSTER_GPUS}: "
                     "admitted Jobs can find fewer GPUs than their quota")
    return notes


# ------------------------------------------------------------------ running it
def run(submission: Any, until: str = HORIZON):
    """Simulate the cluster and the submission: a ``gpu_lab.Simulation``."""

    return simulate([*documents(CLUSTER), *documents(submission)], until=until)


def _job_rows(sim) -> dict[str, dict]:
    return {f"{r['namespace']}/{r['name']}": r for r in sim.jobs.to_dict("records")}


def _pods_of(sim, work: Work):
    t = sim.timeline
    return t[(t["namespace"] == work.namespace) & (t["owner"] == work.name)]


def _stranded_gpu_hours(pods) -> float:
    return float((pods["gpus"] * pods["stranded_s"]).sum()) / 3600


def why_unfinished(sim, work: Work, messages: dict[str, str] | None = None) -> str:
    """One clause on why a Job had not finished when the clock stopped. ``messages``: a
    pending pod's scheduler message per Job (``pending_messages``)."""
    job = _job_rows(sim).get(work.key)
    if job is None:
        return f"{work.key} was never created"
    pods = _pods_of(sim, work)
    state = job["state"]
    if state == "Failed":
        timeouts = int(((pods["phase"] == "Failed") & (pods["reason"] == "Error")).sum())
        why = f" ({job['message']})" if job.get("message") else ""
        cause = (f", {timeouts} of them rendezvous timeouts ({TIMEOUT}): a timeout gives GPUs back but "
                 "decides nothing about who gets them next" if timeouts else "")
        return (f"{work.key} Failed at {_hours(job['finished_at'])}: {job['reason']}{why} after "
                f"{_plural(int(job['failed']), 'failed worker')}{cause}")
    if state == "Suspended":
        message = job.get("message") or "not admitted"
        queue = f" in LocalQueue {job['queue']}" if isinstance(job.get("queue"), str) else ""
        return f"{work.key} stayed Suspended{queue}: {message}"
    running = pods[pods["phase"] == "Running"]
    pending = pods[pods["phase"] == "Pending"]
    if running.empty:
        message = job.get("message") or (messages or {}).get(work.key, "")
        message = f": {message}" if message else ""
        return f"{work.key} never started a worker ({_plural(len(pending), 'pending pod')}){message}"
    size = len(running) + len(pending)
    return (f"{work.key}: {len(running)} of {size} workers running ({int(running['gpus'].sum())} GPUs held), "
            f"{len(pending)} pending")


def _deadlock_note(sim, stuck: list[Work]) -> str:
    """When two stuck rendezvous Jobs hold every GPU between them, say so."""
    held = {}
    for w in stuck:
        pods = _pods_of(sim, w)
        running = pods[pods["phase"] == "Running"]
        if w.rendezvous and not running.empty and (pods["phase"] == "Pending").any():
            held[w.key] = int(running["gpus"].sum())
    if len(held) < 2:
        return ""
    total = int(sim.series["gpus_total"].iloc[-1]) if len(sim.series) else 0
    held_all = sum(held.values())
    free = total - int(sim.series["gpus_allocated"].iloc[-1]) if len(sim.series) else 0
    return (f"; together they hold {held_all} of {total} GPUs ({free} free) and each waits for GPUs the other "
            "holds: a deadlock, which no timeout or preemption here will break. Pods are placed one at a "
            "time, so each Job got part of the GPUs as they were freed")


def pending_messages(submission: Any, until: str = HORIZON) -> dict[str, str]:
    """The scheduler's message for one pending pod of each Job still waiting at ``until``
    (``namespace/job`` -> message), read from a session run as long as the checks run."""

    lab = connect("sim", seed=0)
    try:
        lab.apply([*documents(CLUSTER), *documents(submission)])
        lab.advance(parse_duration(until))
        pods = lab.pods()
    finally:
        lab.close()
    out: dict[str, str] = {}
    for w in WORK:
        mine = pods[(pods["namespace"] == w.namespace) & pods["name"].str.startswith(f"{w.name}-")
                    & (pods["phase"] == "Pending")]
        said = [m for m in mine["message"] if isinstance(m, str) and m]
        if said:
            out[w.key] = said[0]
    return out


# ------------------------------------------------------------------ checks
def check_all_finish(submission: Any, deadline: str = "7h") -> Feedback:
    """Every Job of the sweep completes, the last by ``deadline``."""
    c = Checklist(f"{TITLE}: every sweep Job finishes by {deadline}",
                  look="kubectl describe job -n research <job>")
    problems = work_problems(submission)
    c.require(not problems, "the submission changes tonight's work: " + "; ".join(problems),
              "the submission still runs tonight's work (same GPUs, durations and submission times)")
    sim = run(submission)
    jobs = _job_rows(sim)
    unfinished = [w for w in WORK if (jobs.get(w.key) or {}).get("state") != "Complete"]
    if unfinished:
        messages = pending_messages(submission)
        reasons = "; ".join(why_unfinished(sim, w, messages) for w in unfinished)
        notes = "".join(f"; {n}" for n in gang_notes(submission) + kueue_notes(submission))
        c.require(False, f"{_plural(len(unfinished), 'Job')} never finished in {HORIZON}: {reasons}"
                  f"{_deadlock_note(sim, unfinished)}{notes}")
    else:
        limit = parse_duration(deadline)
        ends = {w.key: float(jobs[w.key]["finished_at"]) for w in WORK}
        last = max(ends, key=lambda k: ends[k])
        listed = ", ".join(f"{k} at {_hours(ends[k])}" for k in sorted(ends, key=lambda k: ends[k]))
        late = [k for k in ends if ends[k] > limit + 1e-9]
        c.require(not late,
                  f"every Job completes, but {', '.join(late)} only at {_hours(ends[last])}, after the "
                  f"{deadline} deadline ({listed})",
                  f"every Job completes: {listed} (deadline {deadline})")
    return c.done()


def check_no_stranded(submission: Any, max_gpu_hours: float = 0.0) -> Feedback:
    """At most ``max_gpu_hours`` GPU-hours held by workers that could not make progress."""
    c = Checklist(f"{TITLE}: no GPU held for nothing", look="kubectl get pods -n research -o wide --watch")
    problems = work_problems(submission)
    c.require(not problems, "the submission changes tonight's work: " + "; ".join(problems),
              "the submission still runs tonight's work")
    sim = run(submission)
    total = float(sim.metrics["gpu_hours_stranded"])
    parts = []
    for w in TRAINING:
        pods = _pods_of(sim, w)
        hours = _stranded_gpu_hours(pods)
        if hours <= 0:
            continue
        waited = pods[pods["stranded_s"] > 0]
        gpus = int(waited["gpus"].max()) if not waited.empty else 0
        longest = float(waited["stranded_s"].max()) if not waited.empty else 0.0
        parts.append(f"{w.key} {hours:.4g} ({_plural(len(waited), 'worker')} x {gpus} GPUs waited up to "
                     f"{_hours(longest)} for the rest of the Job)")
    price = _price_per_gpu_hour()
    money = f", ${total * price:,.0f} at ${price:.2f} per H200-hour" if price else ""
    notes = "".join(f"; {n}" for n in gang_notes(submission) + kueue_notes(submission))
    c.require(total <= max_gpu_hours + 1e-9,
              f"{total:.4g} GPU-hours stranded in {HORIZON} (goal <= {max_gpu_hours:g}){money}: "
              + "; ".join(parts) + notes
              + ". A worker that starts before the rest of its Job holds its GPUs for nothing while it waits",
              f"{total:.4g} GPU-hours stranded (goal <= {max_gpu_hours:g})")
    return c.done()


def _price_per_gpu_hour() -> float:

    try:
        return float(get_model(MODEL).price_per_hour)
    except Exception:  # a price is a bonus in the message, never a reason to fail
        return 0.0


def summary(sim) -> dict[str, Any]:
    """The numbers the checks judge, for a notebook cell: per Job state and finish time,
    stranded GPU-hours, makespan (None when something never finished)."""
    jobs = _job_rows(sim)
    out: dict[str, Any] = {}
    for w in WORK:
        j = jobs.get(w.key) or {}
        fin = j.get("finished_at")
        out[w.key] = {"state": j.get("state", "missing"),
                      "finished_h": None if fin is None or (isinstance(fin, float) and math.isnan(fin))
                      else round(float(fin) / 3600, 4),
                      "stranded_gpu_hours": round(_stranded_gpu_hours(_pods_of(sim, w)), 4)}
    m = sim.metrics
    out["total"] = {"gpu_hours_stranded": m["gpu_hours_stranded"],
                    "makespan_h": None if m["makespan_s"] is None else round(m["makespan_s"] / 3600, 4)}
    return out
