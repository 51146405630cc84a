"""MIG (Multi-Instance GPU): the profiles each GPU model offers and where they may sit.

A MIG-enabled GPU is cut into GPU instances. Each instance takes a run of the
GPU's **8 memory slices**, starting only at the positions its profile allows,
and some of its **7 compute slices**. A layout (a multiset of profiles) is
possible when some placement gives every instance an allowed start, no two
instances share a memory slice, at most 7 compute slices are used, and no
profile exceeds its instance limit (the ``+me`` media-extension variants exist
once per GPU). That is the model of KEP-4815 ("DRA: partitionable devices")
and what ``nvidia-smi mig -lgipp`` prints on real parts::

    profile (A100-40GB / 80GB parts / H200)   compute  memory slices  starts
    7g.40gb  / 7g.80gb  / 7g.141gb                  7        8        0
    4g.20gb  / 4g.40gb  / 4g.71gb                   4        4        0
    3g.20gb  / 3g.40gb  / 3g.71gb                   3        4        0, 4
    2g.10gb  / 2g.20gb  / 2g.35gb                   2        2        0, 2, 4
    1g.10gb  / 1g.20gb  / 1g.35gb                   1        2        0, 2, 4, 6
    1g.5gb+me/ 1g.10gb+me/ 1g.18gb+me (max 1)       1        1        0..6
    1g.5gb   / 1g.10gb  / 1g.18gb                   1        1        0..6

Memory slice 7 has no compute slice of its own: only the 7g profile, a 3g at
4, or the two-slice 1g profile at 6 can use it, which is why seven 1g.5gb
leave one eighth of the memory idle.

Sources (checked November 2026):

* Profile names, instance counts and engines: NVIDIA Multi-Instance GPU User
  Guide, "Supported MIG Profiles"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
  A100-SXM4-40GB table (1g.5gb x7, 1g.5gb+me x1, 1g.10gb x4 [R525+ drivers],
  2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1; the 80GB part uses the same
  table renamed 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb,
  7g.80gb), H100 80GB table (same names and counts as the A100 80GB) and
  H200 141GB table (1g.18gb x7, 1g.18gb+me x1, 1g.35gb x4, 2g.35gb x3,
  3g.71gb x2, 4g.71gb x1, 7g.141gb x1). The guide's A100 table lists the
  memory fraction of 1g.10gb as 1/8; placements show it takes two slices
  ({0,2,4,6}:2), which is what we model.
* Placements: ``nvidia-smi mig -lgipp`` on A100 and H100 80GB
  (``{0,1,2,3,4,5,6}:1`` for 1g and 1g+me, ``{0,2,4,6}:2`` for the two-slice
  1g, ``{0,2,4}:2`` for 2g, ``{0,4}:4`` for 3g, ``{0}:4`` for 4g, ``{0}:8`` for
  7g), and the A100-40GB diagram in KEP-4815 (kubernetes/enhancements,
  keps/sig-node/4815-dra-partitionable-devices). H200 is the same GH100 die
  as the H100 and uses the same placements.
* ``memory_mib`` (the ``nvidia.com/mig-<profile>.memory`` label, NVML's
  ``MemorySizeMB``) and SM/engine counts: KEP-4815's A100-40GB table (exact
  MiB); published ``nvidia-smi mig -lgip`` transcripts of an A100-SXM4-80GB
  (MIGProfiler's README), an H100 80GB HBM3 (all seven profiles) and an H200
  (1g.18gb, 1g.18gb+me, 2g.35gb, 7g.141gb; from a parser's test fixture),
  converted from the GiB column (x1024; two decimals, so within a few MiB).
  Driver versions move these by up to ~128 MiB. Profiles missing from those
  transcripts are marked ``estimated``: A100-80GB 1g.20gb (taken equal to
  2g.20gb, the same two memory slices) and H200 1g.35gb, 3g.71gb, 4g.71gb
  (the H100 pattern on the same die: two-slice profiles equal, four slices =
  twice two slices + 256 MiB; SMs as on the H100). Engines follow the guide's
  tables everywhere.
* For these four models the counting rules (at most 7 compute slices, 8
  memory slices, the instance limits) and the placement search agree on
  every request: tests check the search against plain backtracking over all
  count vectors. The search is kept because that agreement is a property of
  today's tables, not a law.
* Device IDs and the default configs: NVIDIA/mig-parted
  ``deployments/systemd/config-default.yaml`` (see ``migparted.py``).

The search is exact: ``validate_layout`` tries every placement (most
constrained profiles first, with identical instances kept in start order),
so the order of the request never changes the verdict. When no placement
exists, ``ImpossibleLayout`` gives the first rule that breaks, in one line:
a 7g combined with anything, a single-instance profile asked twice, too many
compute slices, too many memory slices, an instance limit, and only then
"no placement keeps the instances apart".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache

from ..errors import ImpossibleLayout, MigError, MigNotSupported, UnknownMigProfile
from .catalog import MODELS, get_model

MEMORY_SLICES = 8
COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile of one GPU model."""

    name: str  # "1g.10gb", "1g.10gb+me"
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]  # allowed first memory slice
    max_instances: int
    memory_mib: int  # NVML MemorySizeMB: the .memory label and what CUDA sees
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int
    estimated: bool = False  # memory/SM figures interpolated, not read off a transcript

    @property
    def memory_gb(self) -> int:
        """The nominal size in the profile's name (``10`` for ``1g.10gb``)."""
        m = re.match(r"\d+g\.(\d+)gb", self.name)
        assert m is not None  # every catalog profile is named <n>g.<m>gb
        return int(m.group(1))

    @property
    def memory_gib(self) -> float:
        """Usable memory in GiB (what ``nvidia-smi`` shows), a bit under the name."""
        return self.memory_mib / 1024

    @property
    def media_extensions(self) -> bool:
        return self.name.endswith("+me")

    @property
    def label_name(self) -> str:
        """The profile as the device plugin and GFD spell it (``+`` becomes ``.``)."""
        return self.name.replace("+", ".")

    @property
    def resource(self) -> str:
        """The mixed-strategy extended resource, e.g. ``nvidia.com/mig-1g.10gb``."""
        return f"nvidia.com/mig-{self.label_name}"

    def attributes(self) -> dict[str, int]:
        """The MIG device attributes GFD turns into ``<resource>.<key>`` labels."""
        return {
            "memory": self.memory_mib,
            "multiprocessors": self.multiprocessors,
            "slices.gi": self.compute_slices,
            "slices.ci": self.compute_slices,
            "engines.copy": self.copy_engines,
            "engines.decoder": self.decoders,
            "engines.encoder": self.encoders,
            "engines.jpeg": self.jpeg,
            "engines.ofa": self.ofa,
        }

    def fits_in(self, other: MigProfile) -> bool:
        """True when an instance of ``other`` could be swapped for one of ``self`` in place."""
        return (set(other.starts) <= set(self.starts) and self.memory_slices <= other.memory_slices
                and self.compute_slices <= other.compute_slices)


@dataclass(frozen=True)
class MigGeometry:
    """The MIG profiles of one GPU model, largest first."""

    model: str
    device_id: str  # PCI device ID as mig-parted's device-filter spells it
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile:
        """Look a profile up: ``1g.5gb``, ``MIG 1g.5gb``, ``1g.5gb.me``, ``nvidia.com/mig-1g.5gb``."""
        key = _profile_key(name)
        for p in self.profiles:
            if key in (p.name, p.label_name):
                return p
        raise UnknownMigProfile(f'unknown MIG profile "{name}" for {self.model} '
                                f'(valid: {", ".join(p.name for p in self.profiles)})')

    def index(self, name: str) -> int:
        return self.profiles.index(self.profile(name))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


def _profile_key(name: str) -> str:
    if not isinstance(name, str):
        return repr(name)
    key = name.strip()
    for prefix in ("nvidia.com/mig-", "mig-", "MIG "):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return key.strip()


def _p(name, compute, memory, starts, max_instances, mib, sm, ce, dec, enc, jpeg, ofa, estimated=False):
    return MigProfile(name, compute, memory, tuple(starts), max_instances, mib, sm, ce, dec, enc,
                      jpeg, ofa, estimated)


_ONE = range(7)
_PAIR = (0, 2, 4, 6)
_DOUBLE = (0, 2, 4)
_HALF = (0, 4)

_GEOMETRIES = (
    # KEP-4815 table (MiB, SMs, engines); guide table (counts, engines).
    MigGeometry("A100-40GB", "0x20B010DE", (
        _p("7g.40gb", 7, 8, (0,), 1, 40192, 98, 7, 5, 0, 1, 1),
        _p("4g.20gb", 4, 4, (0,), 1, 19968, 56, 4, 2, 0, 0, 0),
        _p("3g.20gb", 3, 4, _HALF, 2, 19968, 42, 3, 2, 0, 0, 0),
        _p("2g.10gb", 2, 2, _DOUBLE, 3, 9856, 28, 2, 1, 0, 0, 0),
        _p("1g.10gb", 1, 2, _PAIR, 4, 9856, 14, 1, 1, 0, 0, 0),
        _p("1g.5gb+me", 1, 1, _ONE, 1, 4864, 14, 1, 1, 0, 1, 1),
        _p("1g.5gb", 1, 1, _ONE, 7, 4864, 14, 1, 0, 0, 0, 0),
    )),
    # A100-SXM4-80GB -lgip transcript (9.50/19.50/39.50/79.25 GiB; 14 SMs per slice).
    MigGeometry("A100-80GB", "0x20B210DE", (
        _p("7g.80gb", 7, 8, (0,), 1, 81152, 98, 7, 5, 0, 1, 1),
        _p("4g.40gb", 4, 4, (0,), 1, 40448, 56, 4, 2, 0, 0, 0),
        _p("3g.40gb", 3, 4, _HALF, 2, 40448, 42, 3, 2, 0, 0, 0),
        _p("2g.20gb", 2, 2, _DOUBLE, 3, 19968, 28, 2, 1, 0, 0, 0),
        _p("1g.20gb", 1, 2, _PAIR, 4, 19968, 14, 1, 1, 0, 0, 0, estimated=True),
        _p("1g.10gb+me", 1, 1, _ONE, 1, 9728, 14, 1, 1, 0, 1, 1),
        _p("1g.10gb", 1, 1, _ONE, 7, 9728, 14, 1, 0, 0, 0, 0),
    )),
    # H100 80GB HBM3 -lgip transcript (9.75/19.62/39.50/79.25 GiB).
    MigGeometry("H100-80GB", "0x233010DE", (
        _p("7g.80gb", 7, 8, (0,), 1, 81152, 132, 8, 7, 0, 7, 1),
        _p("4g.40gb", 4, 4, (0,), 1, 40448, 64, 4, 4, 0, 4, 0),
        _p("3g.40gb", 3, 4, _HALF, 2, 40448, 60, 3, 3, 0, 3, 0),
        _p("2g.20gb", 2, 2, _DOUBLE, 3, 20096, 32, 2, 2, 0, 2, 0),
        _p("1g.20gb", 1, 2, _PAIR, 4, 20096, 26, 1, 1, 0, 1, 0),
        _p("1g.10gb+me", 1, 1, _ONE, 1, 9984, 16, 1, 1, 0, 1, 1),
        _p("1g.10gb", 1, 1, _ONE, 7, 9984, 16, 1, 1, 0, 1, 0),
    )),
    # H200 -lgip transcript for 1g.18gb (16.00 GiB), 2g.35gb (32.50) and 7g.141gb (140.00);
    # the rest follow the H100 pattern on the same die (marked estimated).
    MigGeometry("H200-141GB", "0x233510DE", (
        _p("7g.141gb", 7, 8, (0,), 1, 143360, 132, 8, 7, 0, 7, 1),
        _p("4g.71gb", 4, 4, (0,), 1, 66816, 64, 4, 4, 0, 4, 0, estimated=True),
        _p("3g.71gb", 3, 4, _HALF, 2, 66816, 60, 3, 3, 0, 3, 0, estimated=True),
        _p("2g.35gb", 2, 2, _DOUBLE, 3, 33280, 32, 2, 2, 0, 2, 0),
        _p("1g.35gb", 1, 2, _PAIR, 4, 33280, 26, 1, 1, 0, 1, 0, estimated=True),
        _p("1g.18gb+me", 1, 1, _ONE, 1, 16384, 16, 1, 1, 0, 1, 1),
        _p("1g.18gb", 1, 1, _ONE, 7, 16384, 16, 1, 1, 0, 1, 0),
    )),
)

GEOMETRIES: dict[str, MigGeometry] = {g.model: g for g in _GEOMETRIES}
MIG_MODELS: tuple[str, ...] = tuple(GEOMETRIES)


def geometry(model) -> MigGeometry:
    """The MIG geometry of a GPU model (any name ``catalog.get_model`` accepts)."""
    gpu = get_model(model)
    if gpu.name not in GEOMETRIES:
        raise MigNotSupported(f"{gpu.name} GPUs do not support MIG "
                              f"(MIG-capable models: {', '.join(MIG_MODELS)})")
    return GEOMETRIES[gpu.name]


def profiles(model) -> tuple[MigProfile, ...]:
    return geometry(model).profiles


@dataclass(frozen=True)
class Slot:
    """One GPU instance of a placement: its profile and its memory slices."""

    profile: str
    start: int
    size: int  # memory slices
    compute: int  # compute slices

    @property
    def end(self) -> int:
        return self.start + self.size - 1

    def __str__(self) -> str:
        return f"{self.profile}@{self.start}" + (f"-{self.end}" if self.size > 1 else "")


@dataclass(frozen=True)
class Placement:
    """Where each instance of a valid layout sits, ordered by first memory slice."""

    model: str
    slots: tuple[Slot, ...]

    @property
    def profiles(self) -> tuple[str, ...]:
        """The layout as a multiset: profile names, largest profile first."""
        order = geometry(self.model).names
        return tuple(sorted((s.profile for s in self.slots), key=order.index))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self.profiles:
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def memory_slices_used(self) -> int:
        return sum(s.size for s in self.slots)

    @property
    def compute_slices_used(self) -> int:
        return sum(s.compute for s in self.slots)

    @property
    def free_memory_slices(self) -> tuple[int, ...]:
        used = {i for s in self.slots for i in range(s.start, s.end + 1)}
        return tuple(i for i in range(MEMORY_SLICES) if i not in used)

    def diagram(self) -> str:
        """The 8 memory slices as one ASCII row, e.g. ``|1g.5gb |1g.5gb |2g.10gb        |3g.20gb ...|``.

        Every slice is one cell; an instance spans its cells; ``-`` marks a free slice.
        """
        width = max([len(s.profile) for s in self.slots] + [4])
        cells, i = [], 0
        by_start = {s.start: s for s in self.slots}
        while i < MEMORY_SLICES:
            s = by_start.get(i)
            if s is None:
                cells.append("-".ljust(width))
                i += 1
            else:
                cells.append(s.profile.ljust(s.size * width + s.size - 1))
                i += s.size
        return "|" + "|".join(cells) + "|"

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "profiles": list(self.profiles),
            "slots": [{"profile": s.profile, "start": s.start, "memorySlices": s.size,
                       "computeSlices": s.compute} for s in self.slots],
            "memorySlicesUsed": self.memory_slices_used,
            "computeSlicesUsed": self.compute_slices_used,
        }

    def __str__(self) -> str:
        return ", ".join(str(s) for s in self.slots) if self.slots else "(no instances)"


def _counts(geom: MigGeometry, request) -> tuple[int, ...]:
    """A request (names or {name: count}) as counts per profile index."""
    counts = [0] * len(geom.profiles)
    items = request.items() if isinstance(request, Mapping) else ((name, 1) for name in request)
    for name, n in items:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise MigError(f'MIG profile "{name}": count must be a non-negative integer, got {n!r}')
        counts[geom.index(name)] += n
    return tuple(counts)


@lru_cache(maxsize=65536)
def _place(model: str, counts: tuple[int, ...]) -> tuple[Slot, ...] | None:
    """Exact search for a placement of ``counts``; None when there is none."""
    geom = GEOMETRIES[model]
    if any(n > p.max_instances for p, n in zip(geom.profiles, counts)):
        return None
    if sum(p.compute_slices * n for p, n in zip(geom.profiles, counts)) > COMPUTE_SLICES:
        return None
    if sum(p.memory_slices * n for p, n in zip(geom.profiles, counts)) > MEMORY_SLICES:
        return None
    # Most constrained first: fewest allowed starts, then widest.
    items = sorted((p for p, n in zip(geom.profiles, counts) for _ in range(n)),
                   key=lambda p: (len(p.starts), -p.memory_slices, geom.profiles.index(p)))
    chosen: list[Slot] = []

    def search(i: int, used: int, min_start: int) -> bool:
        if i == len(items):
            return True
        p = items[i]
        for start in p.starts:
            if start < min_start:
                continue  # identical instances are placed in start order (no mirrored retries)
            mask = ((1 << p.memory_slices) - 1) << start
            if used & mask:
                continue
            chosen.append(Slot(p.name, start, p.memory_slices, p.compute_slices))
            nxt = items[i + 1] if i + 1 < len(items) else None
            if search(i + 1, used | mask, start + 1 if nxt is p else 0):
                return True
            chosen.pop()
        return False

    if not search(0, 0, 0):
        return None
    return tuple(sorted(chosen, key=lambda s: s.start))


def _summary(geom: MigGeometry, counts: tuple[int, ...]) -> str:
    parts = [p.name if n == 1 else f"{p.name} x{n}" for p, n in zip(geom.profiles, counts) if n]
    return " + ".join(parts) if parts else "nothing"


def _starts(p: MigProfile) -> str:
    if len(p.starts) == 1:
        return f"slice {p.starts[0]}"
    if p.starts == tuple(range(p.starts[0], p.starts[-1] + 1)):
        return f"slices {p.starts[0]}-{p.starts[-1]}"
    return "slices " + ", ".join(map(str, p.starts[:-1])) + f" or {p.starts[-1]}"


def _reason(geom: MigGeometry, counts: tuple[int, ...]) -> str:
    """Why ``counts`` has no placement, in one line (the first rule that breaks)."""
    on = f"an {geom.model}"  # every MIG model name starts with a vowel sound (A100, H100, H200)
    summary = _summary(geom, counts)
    total = sum(counts)
    for p, n in zip(geom.profiles, counts):
        if n and p.memory_slices == MEMORY_SLICES and total > 1:
            return f"{p.name} uses the whole GPU and cannot be combined with other instances (asked for {summary})"
    for p, n in zip(geom.profiles, counts):
        if n > p.max_instances == 1:
            why = ("a GPU has one set of media extensions" if p.media_extensions
                   else f"it can only start at memory {_starts(p)}")
            return f"only one {p.name} fits on {on} (max 1 instance: {why}); asked for {n}"
    compute = sum(p.compute_slices * n for p, n in zip(geom.profiles, counts))
    if compute > COMPUTE_SLICES:
        return f"{summary} needs {compute} compute slices; {on} has {COMPUTE_SLICES}"
    memory = sum(p.memory_slices * n for p, n in zip(geom.profiles, counts))
    if memory > MEMORY_SLICES:
        return f"{summary} needs {memory} memory slices; {on} has {MEMORY_SLICES}"
    for p, n in zip(geom.profiles, counts):
        if n > p.max_instances:
            return f"at most {p.max_instances} {p.name} fit on {on}; asked for {n}"
    detail = "; ".join(f"{p.name} takes {p.memory_slices} starting at memory {_starts(p)}"
                       for p, n in zip(geom.profiles, counts) if n)
    return f"no placement of {summary} on {on} keeps the instances on separate memory slices ({detail})"


def validate_layout(model, profiles: Iterable[str] | Mapping[str, int]) -> Placement:
    """Return a placement for the requested instances or raise ``ImpossibleLayout``.

    ``profiles`` is a list of profile names (repeats allowed) or a mapping
    ``{profile: count}`` as in a mig-parted ``mig-devices`` block. The result
    does not depend on the order of the request. An empty request is valid
    (MIG enabled, no instances: mig-parted's ``all-enabled``).
    """
    geom = geometry(model)
    counts = _counts(geom, profiles)
    slots = _place(geom.model, counts)
    if slots is None:
        names = tuple(p.name for p, n in zip(geom.profiles, counts) for _ in range(n))
        raise ImpossibleLayout(geom.model, names, _reason(geom, counts))
    return Placement(geom.model, slots)


def is_valid_layout(model, profiles) -> bool:
    try:
        validate_layout(model, profiles)
    except ImpossibleLayout:
        return False
    return True


@cache
def _all_layouts(model: str) -> tuple[tuple[tuple[str, ...], Placement], ...]:
    geom = GEOMETRIES[model]
    found: list[tuple[int, ...]] = []

    def walk(i: int, counts: list[int], compute: int, memory: int) -> None:
        if i == len(geom.profiles):
            if any(counts) and _place(model, tuple(counts)) is not None:
                found.append(tuple(counts))
            return
        p = geom.profiles[i]
        for n in range(p.max_instances + 1):
            c, m = compute + n * p.compute_slices, memory + n * p.memory_slices
            if c > COMPUTE_SLICES or m > MEMORY_SLICES:
                break
            counts[i] = n
            walk(i + 1, counts, c, m)
        counts[i] = 0

    walk(0, [0] * len(geom.profiles), 0, 0)
    out = []
    for counts in found:
        slots = _place(model, counts)
        assert slots is not None  # walk() kept only counts that place
        placement = Placement(model, slots)
        out.append((placement.profiles, placement))
    # Fullest first (compute, then memory), then by profile names for a stable order.
    out.sort(key=lambda e: (-e[1].compute_slices_used, -e[1].memory_slices_used,
                            [geom.names.index(n) for n in e[0]]))
    return tuple(out)


def all_layouts(model) -> list[tuple[tuple[str, ...], Placement]]:
    """Every distinct valid multiset of profiles (not the empty one), with one placement each.

    Multisets are tuples of profile names, largest profile first; the list is
    ordered fullest first. Computed once per model and cached.
    """
    return list(_all_layouts(geometry(model).model))


def maximal_layouts(model) -> list[tuple[tuple[str, ...], Placement]]:
    """The valid layouts to which no further instance can be added."""
    geom = geometry(model)
    out = []
    for names, placement in _all_layouts(geom.model):
        counts = list(_counts(geom, names))
        grows = False
        for i in range(len(counts)):
            counts[i] += 1
            grows = grows or _place(geom.model, tuple(counts)) is not None
            counts[i] -= 1
        if not grows:
            out.append((names, placement))
    return out


def mig_capable_models() -> tuple[str, ...]:
    """Catalogued models with MIG (the catalog's ``mig_capable`` flag agrees)."""
    assert all(MODELS[m].mig_capable for m in MIG_MODELS)
    return MIG_MODELS
