"""MIG planner: the fewest GPUs that hold every replica of every service in its own MIG instance.

Input: services with a GPU memory footprint (GB, compared with the instance's
usable memory as ``nvidia-smi`` shows it: a ``1g.10gb`` on an H100 holds 9.75
GiB, so a 10 GB model does not fit it), an optional number of compute slices
and a replica count. Each replica gets one MIG instance; the plan gives every
GPU a layout that ``mig.validate_layout`` accepts.

How it stays exact and fast:

1. On every catalogued GPU the MIG profiles (leaving out the single ``+me``
   variant) form a chain under "fits in place of": a ``1g.10gb`` can take the
   place of a ``1g.20gb`` (it may start anywhere the other may, and uses a
   subset of its slices), which can take the place of a ``2g.20gb``, then
   ``3g``, ``4g``, ``7g``. (Checked in code; a model without that property is
   refused.) So giving each replica the *smallest* profile that holds it never
   costs a GPU: swapping a larger instance for a smaller one keeps any layout
   valid.
2. A set of replicas fits on a set of GPU layouts exactly when, for every
   profile size k, the layouts offer at least as many instances of size >= k
   as there are replicas needing size >= k (Hall's theorem for nested
   choices). Each layout is thus a vector of these counts; dominated vectors
   are dropped (11 remain on an H100, out of 127 layouts).
3. The fewest GPUs is then a small integer program (one column per layout
   vector, one row per size) solved by branch and bound over column counts.
   Its lower bounds are exact linear-programming bounds, evaluated as the
   maximum over the vertices of the dual polytope (enumerated once per GPU
   model). The search stops when a plan meets the bound; if it ever hit its
   node limit the plan says ``optimal: False`` and reports the proven lower
   bound instead. The 50-service benchmark (``benchmarks/mig_planner.py``)
   runs well under a second.

Replicas too large for the biggest MIG instance but within a whole GPU get a
GPU with MIG disabled. Prices are the catalog's reference on-demand prices
(``catalog.py``); a month is 730 hours.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import GpuLabError, PlanError
from .catalog import get_model
from .mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    MigProfile,
    Placement,
    all_layouts,
    geometry,
    validate_layout,
)

HOURS_PER_MONTH = 730
CSV_COLUMNS = ("name", "memory_gb", "compute_slices", "replicas")
NODE_LIMIT = 200_000
WHOLE = "whole-gpu"  # profile name used for replicas that need MIG disabled


@dataclass(frozen=True)
class Service:
    name: str
    memory_gb: float
    compute_slices: int | None = None
    replicas: int = 1


@dataclass(frozen=True)
class GpuPlan:
    """One GPU of the plan: its MIG layout (None = MIG disabled) and who runs where."""

    index: int
    layout: tuple[str, ...] | None  # profile names, largest first; None = whole GPU
    placement: Placement | None
    replicas: tuple[tuple[str, int, str], ...]  # (service, replica index, profile)

    def to_dict(self) -> dict:
        return {
            "gpu": self.index,
            "migEnabled": self.layout is not None,
            "layout": list(self.layout) if self.layout is not None else None,
            "placement": str(self.placement) if self.placement is not None else None,
            "replicas": [{"service": s, "replica": r, "profile": p} for s, r, p in self.replicas],
        }


@dataclass(frozen=True)
class MigPlan:
    model: str
    services: tuple[Service, ...]
    profile_of: dict[str, str]  # service -> the profile each of its replicas gets
    gpus: tuple[GpuPlan, ...]
    lower_bound: int
    bounds: dict[str, int]  # memory, compute and LP lower bounds on the number of GPUs
    optimal: bool  # True: no plan uses fewer GPUs (len(gpus) equals a proven bound)
    nodes: int  # branch-and-bound nodes explored
    price_per_hour: float  # per GPU

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def replica_count(self) -> int:
        return sum(s.replicas for s in self.services)

    @property
    def whole_gpu_count(self) -> int:
        """The baseline: one whole GPU per replica, no MIG."""
        return self.replica_count

    def utilisation(self) -> dict[str, float]:
        """Memory asked for, memory handed out and compute slices handed out, over the GPUs bought."""
        gpu = get_model(self.model)
        total_gib = self.gpu_count * gpu.memory_mib / 1024
        asked = sum(s.memory_gb * s.replicas for s in self.services)
        geom = geometry(self.model)
        handed = compute = 0.0
        for g in self.gpus:
            for _, _, p in g.replicas:
                if p == WHOLE:
                    handed += gpu.memory_mib / 1024
                    compute += COMPUTE_SLICES
                else:
                    prof = geom.profile(p)
                    handed += prof.memory_gib
                    compute += prof.compute_slices
        n = max(self.gpu_count, 1)
        return {
            "memory_requested": asked / total_gib if total_gib else 0.0,
            "memory_allocated": handed / total_gib if total_gib else 0.0,
            "compute_allocated": compute / (COMPUTE_SLICES * n) if self.gpu_count else 0.0,
        }

    def cost(self) -> dict[str, float]:
        mig = self.gpu_count * self.price_per_hour
        whole = self.whole_gpu_count * self.price_per_hour
        return {
            "per_hour": round(mig, 4),
            "per_month": round(mig * HOURS_PER_MONTH, 2),
            "whole_gpu_per_hour": round(whole, 4),
            "whole_gpu_per_month": round(whole * HOURS_PER_MONTH, 2),
            "saving_per_month": round((whole - mig) * HOURS_PER_MONTH, 2),
        }

    def mig_configs(self) -> dict:
        """The plan as a mig-parted file: one entry per GPU index."""
        entries = []
        for g in self.gpus:
            if g.layout is None:
                entries.append({"devices": [g.index], "mig-enabled": False})
            else:
                counts: dict[str, int] = {}
                for p in g.layout:
                    counts[p] = counts.get(p, 0) + 1
                entries.append({"devices": [g.index], "mig-enabled": True, "mig-devices": counts})
        return {"version": "v1", "mig-configs": {"planned": entries}}

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "gpus": self.gpu_count,
            "wholeGpus": self.whole_gpu_count,
            "lowerBound": self.lower_bound,
            "bounds": dict(self.bounds),
            "optimal": self.optimal,
            "profiles": dict(self.profile_of),
            "utilisation": {k: round(v, 4) for k, v in self.utilisation().items()},
            "cost": self.cost(),
            "plan": [g.to_dict() for g in self.gpus],
        }

    def __str__(self) -> str:
        u, c = self.utilisation(), self.cost()
        proof = "optimal" if self.optimal else f"not proven optimal; at least {self.lower_bound}"
        lines = [
            f"{self.gpu_count} {self.model} GPUs with MIG ({proof}; lower bound {self.lower_bound}) "
            f"vs {self.whole_gpu_count} with one whole GPU per replica",
            f"utilisation: memory requested {u['memory_requested']:.0%}, memory allocated "
            f"{u['memory_allocated']:.0%}, compute slices allocated {u['compute_allocated']:.0%}",
            f"cost: ${c['per_hour']:.2f}/h (${c['per_month']:,.0f}/month) vs ${c['whole_gpu_per_hour']:.2f}/h "
            f"(${c['whole_gpu_per_month']:,.0f}/month); saves ${c['saving_per_month']:,.0f}/month",
        ]
        for g in self.gpus:
            who = ", ".join(f"{s}#{r}" for s, r, _ in g.replicas)
            what = "MIG disabled" if g.layout is None else str(g.placement)
            lines.append(f"  GPU {g.index}: {what}  [{who}]")
        return "\n".join(lines)


# ---------------------------------------------------------------- the chain of profiles
@cache
def _chain(model: str) -> tuple[MigProfile, ...]:
    """Non-``+me`` profiles, smallest first; each fits in place of the next."""
    geom = geometry(model)
    chain = tuple(sorted((p for p in geom.profiles if not p.media_extensions),
                         key=lambda p: (p.compute_slices, p.memory_slices, p.memory_mib)))
    for a, b in zip(chain, chain[1:]):
        if not a.fits_in(b):
            raise PlanError(f"{model}: {a.name} cannot take the place of {b.name}; the planner "
                            "needs the MIG profiles to form a chain")
    return chain


def smallest_profile(model, memory_gb: float, compute_slices: int | None = None) -> MigProfile | None:
    """The smallest (non-``+me``) profile with enough usable memory and compute; None if none."""
    need_c = compute_slices or 1
    for p in _chain(geometry(model).model):
        if p.memory_gib + 1e-9 >= memory_gb and p.compute_slices >= need_c:
            return p
    return None


@cache
def _columns(model: str) -> tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]:
    """Undominated layout vectors (instances of rank >= k, per k) with one layout each."""
    chain = _chain(model)
    rank = {p.name: i for i, p in enumerate(chain)}
    best: dict[tuple[int, ...], tuple[str, ...]] = {}
    for names, _ in all_layouts(model):
        if any(n not in rank for n in names):
            continue
        vec = tuple(sum(1 for n in names if rank[n] >= k) for k in range(len(chain)))
        best.setdefault(vec, names)
    vecs = list(best)
    keep = [v for v in vecs if not any(w != v and all(a >= b for a, b in zip(w, v)) for w in vecs)]
    # Big instances first: the search fixes the scarce columns early.
    keep.sort(key=lambda v: tuple(-x for x in reversed(v)))
    return tuple((v, best[v]) for v in keep)


@cache
def _dual_vertices(model: str, first: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Vertices of {y >= 0 : c_j . y <= 1 for columns j >= first}, and the ranks they cover.

    The LP bound for demand S using those columns is max over vertices of S . y
    (the dual LP's optimum is at a vertex). Ranks no column covers make the
    demand infeasible when positive; they are reported separately.
    """
    cols = [np.array(v, dtype=float) for v, _ in _columns(model)[first:]]
    k = len(_chain(model))
    covered = tuple(r for r in range(k) if any(c[r] > 0 for c in cols))
    d = len(covered)
    if d == 0:
        return np.zeros((1, k)), covered
    rows = [c[list(covered)] for c in cols] + [-np.eye(d)[i] for i in range(d)]
    rhs = [1.0] * len(cols) + [0.0] * d
    G, h = np.array(rows), np.array(rhs)
    verts = []
    combos = np.array(list(itertools.combinations(range(len(rows)), d)))
    A, b = G[combos], h[combos]
    ok = np.abs(np.linalg.det(A)) > 1e-9
    if ok.any():
        ys = np.linalg.solve(A[ok], b[ok][..., None])[..., 0]
        feasible = np.all(ys @ G.T <= h + 1e-9, axis=1)
        for y in np.round(ys[feasible], 9):
            full = np.zeros(k)
            full[list(covered)] = y
            verts.append(full)
    uniq = np.unique(np.array(verts), axis=0) if verts else np.zeros((1, k))
    return uniq, covered


def _lp_bound(model: str, first: int, demand: np.ndarray) -> float:
    """LP lower bound on GPUs covering ``demand`` with columns ``first..``; inf if impossible."""
    verts, covered = _dual_vertices(model, first)
    if any(demand[r] > 0 for r in range(len(demand)) if r not in covered):
        return math.inf
    if not demand.any():
        return 0.0
    return float((verts @ demand).max())


def _ceil(x: float) -> int:
    """A finite bound rounded up, forgiving float noise."""
    return int(math.ceil(x - 1e-7))


def _greedy(vecs: list[np.ndarray], demand: np.ndarray) -> tuple[list[int], int]:
    """A first plan: each new GPU takes the layout that serves the largest waiting replicas best."""
    counts, rem = [0] * len(vecs), demand.copy()
    while rem.any():
        j = max(range(len(vecs)), key=lambda j: tuple(np.minimum(vecs[j], rem)[::-1]))
        counts[j] += 1
        rem = np.maximum(rem - vecs[j], 0)
    return counts, sum(counts)


def _solve(model: str, demand: tuple[int, ...]) -> tuple[list[int], int, bool, int]:
    """Branch and bound over column counts. Returns (counts, LP bound, proven, nodes)."""
    cols = _columns(model)
    vecs = [np.array(v) for v, _ in cols]
    S = np.array(demand)
    root = _ceil(_lp_bound(model, 0, S))  # finite: every rank has a layout at the root
    best: list[int] | None = None
    best_n = math.inf
    nodes = 0
    counts = [0] * len(cols)

    def need(j: int, rem: np.ndarray) -> int:
        """Copies of column j that alone would cover every rank it can help with."""
        v = vecs[j]
        return max((math.ceil(rem[r] / v[r]) for r in range(len(rem)) if v[r] > 0 and rem[r] > 0), default=0)

    def dfs(j: int, rem: np.ndarray, used: int) -> bool:
        nonlocal best, best_n, nodes
        nodes += 1
        if not rem.any():
            if used < best_n:
                best_n, best = used, counts.copy()
            return best_n <= root
        if j == len(cols) or nodes > NODE_LIMIT:
            return False
        bound = _lp_bound(model, j, rem)
        if math.isinf(bound) or used + _ceil(bound) >= best_n:  # inf: these columns cannot cover rem
            return False
        for x in range(min(need(j, rem), int(min(best_n - used - 1, 10**9))), -1, -1):
            counts[j] = x
            nxt = np.maximum(rem - x * vecs[j], 0)
            if dfs(j + 1, nxt, used + x):
                return True
        counts[j] = 0
        return False

    best, best_n = _greedy(vecs, S)
    if best_n > root:
        dfs(0, S, 0)
    proven = best_n <= root or nodes <= NODE_LIMIT
    return best, root, proven, nodes


# ---------------------------------------------------------------- the public planner
def plan(services: Iterable[Service | dict | tuple], model) -> MigPlan:
    """Plan MIG layouts that hold every replica and use as few GPUs as possible."""
    geom = geometry(model)
    gpu = get_model(geom.model)
    svcs = tuple(_service(s) for s in services)
    if not svcs:
        raise PlanError("no services to plan")
    seen: set[str] = set()
    for s in svcs:
        if s.name in seen:
            raise PlanError(f'service "{s.name}" is listed twice')
        seen.add(s.name)
    chain = _chain(geom.model)
    rank = {p.name: i for i, p in enumerate(chain)}
    profile_of: dict[str, str] = {}
    for s in svcs:
        p = smallest_profile(geom.model, s.memory_gb, s.compute_slices)
        if p is not None:
            profile_of[s.name] = p.name
        elif s.memory_gb <= gpu.memory_mib / 1024 + 1e-9 and (s.compute_slices or 1) <= COMPUTE_SLICES:
            profile_of[s.name] = WHOLE
        else:
            biggest = chain[-1]
            raise PlanError(f'service "{s.name}" needs {s.memory_gb:g} GB'
                            + (f" and {s.compute_slices} compute slices" if s.compute_slices else "")
                            + f"; the largest MIG instance on an {geom.model} is {biggest.name} "
                            f"({biggest.memory_gib:.2f} GiB, {biggest.compute_slices} compute slices) "
                            f"and a whole GPU has {gpu.memory_mib / 1024:.2f} GiB")

    # Replicas by rank, largest first (the assignment below relies on that order).
    replicas = [(s.name, r, rank[profile_of[s.name]]) for s in svcs if profile_of[s.name] != WHOLE
                for r in range(s.replicas)]
    replicas.sort(key=lambda x: -x[2])
    whole = [(s.name, r) for s in svcs if profile_of[s.name] == WHOLE for r in range(s.replicas)]
    k = len(chain)
    demand = tuple(sum(1 for _, _, rk in replicas if rk >= i) for i in range(k))
    if any(demand):
        counts, lp, proven, nodes = _solve(geom.model, demand)
    else:
        counts, lp, proven, nodes = [0] * len(_columns(geom.model)), 0, True, 0

    # Open the chosen layouts and hand out slots: each replica (largest first)
    # takes the smallest free slot that holds it.
    slots: list[list[int]] = []  # per GPU: free slot ranks
    for (_, names), n in zip(_columns(geom.model), counts):
        for _ in range(n):
            slots.append(sorted(rank[x] for x in names))
    assigned: list[list[tuple[str, int, str]]] = [[] for _ in slots]
    for name, r, rk in replicas:
        choice = min(((slot, g) for g, free in enumerate(slots) for slot in free if slot >= rk),
                     default=None)
        if choice is None:  # Hall's condition guarantees a slot; kept as a guard
            raise PlanError(f"internal error: no slot for {name} on {geom.model}")
        slot, g = choice
        slots[g].remove(slot)
        assigned[g].append((name, r, chain[rk].name))
    gpus: list[GpuPlan] = []
    for reps in assigned:
        if not reps:
            continue
        placement = validate_layout(geom.model, [p for _, _, p in reps])
        order = {n: i for i, n in enumerate(placement.profiles)}
        reps = sorted(reps, key=lambda x: (order[x[2]], x[0], x[1]))
        gpus.append(GpuPlan(len(gpus), placement.profiles, placement, tuple(reps)))
    for name, r in whole:
        gpus.append(GpuPlan(len(gpus), None, None, ((name, r, WHOLE),)))

    # Lower bounds: every replica needs its own memory and compute; LP over layouts.
    mig_reps = [chain[rk] for _, _, rk in replicas]
    mem = _ceil(sum(p.memory_slices for p in mig_reps) / MEMORY_SLICES)
    comp = _ceil(sum(p.compute_slices for p in mig_reps) / COMPUTE_SLICES)
    bounds = {"memory_slices": mem + len(whole), "compute_slices": comp + len(whole),
              "linear_program": lp + len(whole)}
    lower = max(bounds.values())
    optimal = proven or len(gpus) <= lower
    return MigPlan(geom.model, svcs, profile_of, tuple(gpus), lower, bounds, optimal, nodes,
                   gpu.price_per_hour)


def _service(s: Service | dict | tuple) -> Service:
    if isinstance(s, Service):
        svc = s
    elif isinstance(s, dict):
        unknown = sorted(set(s) - set(CSV_COLUMNS))
        if unknown:
            raise PlanError(f'service: unknown field "{unknown[0]}" (known: {", ".join(CSV_COLUMNS)})')
        svc = Service(s.get("name"), s.get("memory_gb"),  # type: ignore[arg-type]  # checked below, as tuples are
                      s.get("compute_slices"), s.get("replicas", 1))
    elif isinstance(s, (tuple, list)):
        svc = Service(*s)
    else:
        raise PlanError(f"service must be a Service, mapping or tuple, got {s!r}")
    if not isinstance(svc.name, str) or not svc.name:
        raise PlanError(f"service name must be a non-empty string, got {svc.name!r}")
    at = f'service "{svc.name}"'
    if isinstance(svc.memory_gb, bool) or not isinstance(svc.memory_gb, (int, float)) or not svc.memory_gb > 0:
        raise PlanError(f"{at}: memory_gb must be a positive number, got {svc.memory_gb!r}")
    c = svc.compute_slices
    if c is not None and (isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= COMPUTE_SLICES):
        raise PlanError(f"{at}: compute_slices must be an integer from 1 to {COMPUTE_SLICES}, got {c!r}")
    if isinstance(svc.replicas, bool) or not isinstance(svc.replicas, int) or svc.replicas < 1:
        raise PlanError(f"{at}: replicas must be an integer >= 1, got {svc.replicas!r}")
    return svc


def read_services_csv(source: str | Path | io.TextIOBase) -> list[Service]:
    """Read ``name,memory_gb,compute_slices,replicas`` (the last two may be blank: none and 1).

    Errors are one line naming the file, the line and the column.
    """
    if isinstance(source, io.TextIOBase):
        where, text = getattr(source, "name", "services"), source.read()
    else:
        where = str(source)
        try:
            text = Path(source).read_text()
        except OSError as err:
            raise PlanError(f"{where}: cannot read: {err.strerror or err}") from None
    records = list(csv.reader(io.StringIO(text)))
    rows = [(i + 1, r) for i, r in enumerate(records) if r and any(c.strip() for c in r)
            and not r[0].lstrip().startswith("#")]
    if not rows:
        raise PlanError(f"{where}: empty file (expected a header: {','.join(CSV_COLUMNS)})")
    line, header = rows[0]
    header = [h.strip() for h in header]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        raise PlanError(f'{where}: line {line}: unknown column "{unknown[0]}" (known: {", ".join(CSV_COLUMNS)})')
    for col in ("name", "memory_gb"):
        if col not in header:
            raise PlanError(f'{where}: line {line}: missing column "{col}" (header: {",".join(CSV_COLUMNS)})')
    out: list[Service] = []
    seen: dict[str, int] = {}
    for line, row in rows[1:]:
        if len(row) > len(header):
            raise PlanError(f"{where}: line {line}: {len(row)} fields, the header has {len(header)}")
        cells = {h: (row[i].strip() if i < len(row) else "") for i, h in enumerate(header)}
        name = cells["name"]
        if not name:
            raise PlanError(f"{where}: line {line}: name: must not be empty")
        if name in seen:
            raise PlanError(f'{where}: line {line}: name: "{name}" already on line {seen[name]}')
        seen[name] = line
        mem = _number(cells["memory_gb"], float)
        if mem is None or not mem > 0 or math.isinf(mem):
            raise PlanError(f'{where}: line {line}: memory_gb: must be a positive number, got "{cells["memory_gb"]}"')
        comp = None
        if cells.get("compute_slices"):
            comp = _number(cells["compute_slices"], int)
            if comp is None or not 1 <= comp <= COMPUTE_SLICES:
                raise PlanError(f"{where}: line {line}: compute_slices: must be an integer from 1 to "
                                f'{COMPUTE_SLICES}, got "{cells["compute_slices"]}"')
        reps = 1
        if cells.get("replicas"):
            reps = _number(cells["replicas"], int)
            if reps is None or reps < 1:
                raise PlanError(f'{where}: line {line}: replicas: must be an integer >= 1, got "{cells["replicas"]}"')
        out.append(Service(name, mem, comp, reps))
    if not out:
        raise PlanError(f"{where}: no services after the header")
    return out


def _number(text: str, kind):
    try:
        val = float(text) if kind is float else int(text)
    except ValueError:
        return None
    if kind is float and math.isnan(val):
        return None
    return val


def plan_csv(path: str | Path, model) -> MigPlan:
    return plan(read_services_csv(path), model)


def brute_force_gpus(services: Sequence[Service], model) -> int:
    """Fewest GPUs by trying every grouping of replicas and every profile choice (tiny inputs only).

    Independent of the planner's reasoning: each group must admit some choice
    of profiles (any non-``+me`` profile big enough for each replica) that
    ``validate_layout`` accepts. Used by the tests.
    """
    geom = geometry(model)
    options = []
    for s in services:
        fit = [p.name for p in geom.profiles if not p.media_extensions
               and p.memory_gib + 1e-9 >= s.memory_gb and p.compute_slices >= (s.compute_slices or 1)]
        if not fit:
            raise PlanError(f'service "{s.name}" fits no MIG profile')
        options.extend([fit] * s.replicas)
    n = len(options)

    @cache
    def group_ok(group: tuple[int, ...]) -> bool:
        for choice in itertools.product(*(options[i] for i in group)):
            try:
                validate_layout(geom.model, list(choice))
                return True
            except GpuLabError:
                continue
        return False

    best = n
    def partitions(i: int, groups: list[list[int]]):
        nonlocal best
        if len(groups) >= best:
            return
        if i == n:
            best = len(groups)
            return
        for g in groups:
            g.append(i)
            if group_ok(tuple(g)):
                partitions(i + 1, groups)
            g.pop()
        groups.append([i])
        if group_ok((i,)):
            partitions(i + 1, groups)
        groups.pop()

    partitions(0, [])
    return best
