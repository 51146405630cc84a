"""The real kube-scheduler's own scoring, read back from its log.

kube-scheduler v1.37.2 logs, at verbosity 10 in ``pkg/scheduler/schedule_one.go``, every
score plugin's weighted score for every node it scored ("Plugin scored node for pod") and
each node's total ("Calculated node's final score for pod"); at verbosity 2 and 4 the same
file says when it tries a pod, binds it or gives up. Both backends that run kube-scheduler
raise klog's verbosity for that file alone (``--vmodule=schedule_one=10``, and ``batch=3`` for
the node hints of opportunistic batching: the local control plane's flag, which the kind
config gives kubeadm's scheduler too), so these numbers come from the scheduler's code, not
from gpu-lab's model of it: the sim's explain can be checked against them. Each backend reads
the log its own way (local: the process's log file; kind: the static pod's log through the API
server) and explains a pod with :func:`explain`.

The log holds every attempt; a pod's account is its latest one. A pod group's members
are scored inside the group's cycle, which logs no "About to try" line: a new round of
scores after a finished one starts a new attempt.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ...names import DEFAULT_SCHEDULER
from ...sim.explain import NOT_EVALUATED, Explanation, batched_note
from ..account import ONLY_THE_SIM_HAS_TABLES

#: ``I1201 12:10:40.077865   31713 schedule_one.go:984] "message" key="value" key=value``
_LINE = re.compile(r'^[IWEF](\d{4} [\d:.]+)\s+\d+ (?:schedule_one|batch)\.go:\d+\] "((?:[^"\\]|\\.)*)"(.*)$')
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')

ATTEMPT = "About to try and schedule pod"
PLUGIN_SCORE = "Plugin scored node for pod"
FINAL_SCORE = "Calculated node's final score for pod"
BOUND = "Successfully bound pod to node"
NO_FIT = "Unable to schedule pod; no fit; waiting"
HINT = "OpportunisticBatch provided node hint"  # batch.go, verbosity 3


@dataclass
class Attempt:
    """One scheduling attempt of one pod, as kube-scheduler logged it."""

    pod: str  # namespace/name
    scores: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> plugin -> weighted
    totals: dict[str, int] = field(default_factory=dict)  # node -> final score
    node: str | None = None  # bound to
    evaluated: int | None = None  # nodes the filter looked at (from the bind line)
    feasible: int | None = None  # nodes that passed the filter
    error: str | None = None  # "no fit" message
    hint: str | None = None  # the node opportunistic batching offered from the previous pod
    at: float | None = None  # when it began (seconds since the epoch, from klog's local time)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        # klog quotes with Go's strconv.Quote: backslash escapes only
        return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), value[1:-1])
    return value


def parse_line(line: str) -> tuple[str, dict[str, str]] | None:
    """``(message, {key: value})`` of a schedule_one.go or batch.go line, else None."""
    parsed = _parse(line)
    return None if parsed is None else parsed[1:]


def _parse(line: str) -> tuple[str, str, dict[str, str]] | None:
    m = _LINE.match(line)
    if not m:
        return None
    return (m.group(1), _unquote('"' + m.group(2) + '"'),
            {k: _unquote(v) for k, v in _PAIR.findall(m.group(3))})


def _klog_time(stamp: str) -> float | None:
    """``MMDD hh:mm:ss.uuuuuu`` in the scheduler's local time (this year) as epoch seconds."""
    try:
        t = dt.datetime.strptime(f"{dt.datetime.now().year}{stamp}", "%Y%m%d %H:%M:%S.%f")
    except ValueError:
        return None
    return t.timestamp()


def attempts(lines) -> dict[str, Attempt]:
    """Each pod's latest attempt, from the log's lines (oldest first)."""
    return {a.pod: a for a in history(lines)}


def history(lines) -> list[Attempt]:
    """Every attempt in the log's lines (oldest first), in the order the scheduler began them."""
    out: list[Attempt] = []
    latest: dict[str, Attempt] = {}
    for line in lines:
        if "schedule_one.go" not in line and "batch.go" not in line:
            continue
        parsed = _parse(line.rstrip("\n"))
        if parsed is None:
            continue
        stamp, msg, kv = parsed
        pod = kv.get("pod")
        if pod is None:
            continue
        if msg == ATTEMPT:
            latest[pod] = Attempt(pod, at=_klog_time(stamp))
            out.append(latest[pod])
            continue
        a = latest.get(pod)
        if msg == PLUGIN_SCORE and (a is None or a.totals):
            # a pod group's cycle scores its members without "About to try" lines
            a = latest[pod] = Attempt(pod, at=_klog_time(stamp))
            out.append(a)
        if a is None:  # the log rotated away the start of this attempt
            continue
        try:
            if msg == PLUGIN_SCORE:
                a.scores.setdefault(kv["node"], {})[kv["plugin"]] = int(kv["score"])
            elif msg == FINAL_SCORE:
                a.totals[kv["node"]] = int(kv["score"])
            elif msg == BOUND:
                a.node = kv.get("node")
                a.evaluated = int(kv["evaluatedNodes"]) if "evaluatedNodes" in kv else None
                a.feasible = int(kv["feasibleNodes"]) if "feasibleNodes" in kv else None
            elif msg == NO_FIT:
                a.error = kv.get("err")
            elif msg == HINT:
                a.hint = kv.get("hint")
        except (KeyError, ValueError):
            continue  # a line of another shape: not ours to read
    return out


def history_since(log: Path, mark: tuple[int, int]) -> list[Attempt]:
    """The attempts logged since ``mark`` (``log_mark``: the log's inode and size then); when
    the log has rotated since (a restarted scheduler moves a large log to ``log.1``, keeping
    its inode), the rest of ``log.1`` first."""
    inode, offset = mark

    def lines():
        try:
            rotated = log.stat().st_ino != inode
        except FileNotFoundError:
            rotated = True
        parts = ((log.with_name(log.name + ".1"), offset), (log, 0)) if rotated else ((log, offset),)
        for path, start in parts:
            try:
                with path.open("rb") as fh:
                    fh.seek(start)
                    yield from (line.decode(errors="replace") for line in fh)
            except FileNotFoundError:
                continue
    return history(lines())


def log_mark(log: Path) -> tuple[int, int]:
    """Where the log is now, for ``history_since``."""
    try:
        st = log.stat()
        return st.st_ino, st.st_size
    except FileNotFoundError:
        return 0, 0


_read_cache: dict[Path, tuple[tuple, dict[str, Attempt]]] = {}


def read(log: Path) -> dict[str, Attempt]:
    """Each pod's latest attempt in ``log`` (and the part rotated to ``log.1`` before it);
    read again only when the log changed (explaining every pod reads it once)."""
    try:
        st = log.stat()
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        return {}
    hit = _read_cache.get(log)
    if hit and hit[0] == key:
        return hit[1]
    result = _read(log)
    _read_cache[log] = (key, result)
    return result


def _read(log: Path) -> dict[str, Attempt]:
    def lines():
        for path in (log.with_name(log.name + ".1"), log):
            try:
                with path.open(errors="replace") as fh:
                    yield from fh
            except FileNotFoundError:
                continue
    return attempts(lines())


def score_weights(profile: dict) -> dict[str, int]:
    """Score plugin -> weight in a profile of kube-scheduler's completed configuration
    (``--write-config-to``): multiPoint first, then the score extension point, a weight
    of 0 counting as 1 (as the framework does when it builds the profile)."""
    plugins = profile.get("plugins") or {}
    weights: dict[str, int] = {}
    for entry in ((plugins.get("multiPoint") or {}).get("enabled") or []):
        weights[entry["name"]] = int(entry.get("weight") or 1)
    score = plugins.get("score") or {}
    for entry in score.get("disabled") or []:
        if entry.get("name") == "*":
            weights.clear()
        else:
            weights.pop(entry.get("name"), None)
    for entry in score.get("enabled") or []:
        weights[entry["name"]] = int(entry.get("weight") or 1)
    return weights


FROM_THE_LOG = ("scores: kube-scheduler's own, from its log (schedule_one.go at verbosity 10); "
                "it logs no per-node filter verdicts, so a node it did not score is only known to be "
                "infeasible")


def explained(account: Explanation, attempt: Attempt | None, weights: dict[str, int],
              nodes: list[str]) -> Explanation:
    """``account`` (the pod's condition and events) with the filter result and score table
    of its latest attempt, in the sim's shape: columns (plugin, normalized) and (plugin,
    weighted) plus the total; normalized is the weighted score over the profile's weight."""
    if attempt is None or (not attempt.scores and attempt.node is None):
        return account  # never tried since the log began, or rejected before scoring
    feasible = set(attempt.scores) or ({attempt.node} if attempt.node else set())
    # placed on opportunistic batching's hint: no other node was filtered (batch.go)
    batched = bool(attempt.node) and not attempt.scores and attempt.hint == attempt.node
    other = NOT_EVALUATED if batched else "infeasible"
    filters = pd.DataFrame.from_dict(
        {n: {"result": "feasible" if n in feasible else other} for n in nodes}, orient="index")
    filters.index.name = "node"
    rows: dict[str, dict] = {}
    for node, plugins in attempt.scores.items():
        row: dict = {}
        for plugin, weighted in plugins.items():
            w = weights.get(plugin, 1)
            row[(plugin, "normalized")] = weighted // w if weighted % w == 0 else weighted / w
            row[(plugin, "weighted")] = weighted
        if node in attempt.totals:
            row[("total", "")] = attempt.totals[node]
        rows[node] = row
    scores = pd.DataFrame.from_dict(rows, orient="index")
    notes = [n for n in account.notes if n != ONLY_THE_SIM_HAS_TABLES]
    if not scores.empty:
        scores.columns = pd.MultiIndex.from_tuples(scores.columns)
        scores.index.name = "node"
        if ("total", "") in scores.columns:
            scores = scores.sort_values(("total", ""), ascending=False, kind="stable")
    elif batched and attempt.node:
        notes.append(batched_note(attempt.node))
    elif attempt.node and attempt.feasible == 1:
        notes.append("only one feasible node: the scheduler skips scoring")
    notes.append(FROM_THE_LOG)
    return replace(account, filters=filters, scores=scores, notes=notes)


def explain(account: Explanation, attempts: Mapping[str, Attempt], config: Callable[[], dict],
            nodes: Callable[[], list[str]]) -> Explanation:
    """How a backend that runs kube-scheduler explains a pod: ``account`` (its condition and
    events) with the tables of its latest attempt in ``attempts`` (read from the scheduler's
    log), the score weights of its profile in ``config()`` (the scheduler's completed
    configuration) and every node of ``nodes()``. The configuration and the nodes are asked
    for only when the log has an attempt of the pod."""
    attempt = attempts.get(account.pod)
    if attempt is None:
        return account
    weights = profile_weights(config(), account.profile or DEFAULT_SCHEDULER)
    return explained(account, attempt, weights, sorted(nodes()))


def profile_weights(config: dict, scheduler_name: str) -> dict[str, int]:
    """Score weights of the profile named ``scheduler_name`` in a completed configuration."""
    for profile in config.get("profiles") or []:
        if (profile.get("schedulerName") or DEFAULT_SCHEDULER) == scheduler_name:
            return score_weights(profile)
    return {}


#: kube-scheduler's default podInitialBackoffSeconds and podMaxBackoffSeconds, and its
#: backoffQ ordering window (backoffQOrderingWindowDuration)
INITIAL_BACKOFF_S, MAX_BACKOFF_S, ORDERING_WINDOW_S = 1.0, 10.0, 1.0


def backoff_ends(history: list[Attempt], pods: set[str]) -> float:
    """When the last of ``pods`` (namespace/name) leaves its scheduling backoff; 0 when none of
    them was tried. As v1.37's backoffQ computes it (backend/queue/backoff_queue.go): 1 s
    doubled per earlier failed attempt, at most 10 s, added to the latest attempt, truncated
    to the queue's 1-second ordering window; a pod backs off while that window is not
    before the current one, so it is free one window later."""
    count: dict[str, int] = {}
    last: dict[str, float] = {}
    for a in history:
        if a.pod in pods and a.at is not None:
            count[a.pod] = count.get(a.pod, 0) + 1
            last[a.pod] = a.at
    return max((math.floor(last[p] + min(INITIAL_BACKOFF_S * 2 ** (count[p] - 1), MAX_BACKOFF_S))
                + ORDERING_WINDOW_S for p in last), default=0.0)
