import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Let test modules import the small builders in tests/sim/simkit.py.
sys.path.insert(0, str(Path(__file__).parent / "sim"))
# ... and the shared rule for real-cluster tests in tests/realcluster.py.
sys.path.insert(0, str(Path(__file__).parent))

# ------------------------------------------------------------------ parallel runs (`-n N`)
# `make test` runs the suite on several xdist workers: a real-cluster test mostly waits (on a
# kubelet, a grace period, a controller), so others run meanwhile. Each worker gets whole
# modules (a module's fixtures, a control plane or a kind cluster, start once), or a whole
# xdist_group where modules share one (the kind modules share a kind cluster), or single tests
# of a module marked ``spread`` (independent, long tests: the lab notebooks). The longest go
# first, so that none starts last: seconds per module from the last measured run, in
# durations.json (benchmarks/suite_times.py --write-weights); a stale file only makes the
# order worse, never the result.
WEIGHTS_FILE = Path(__file__).with_name("durations.json")
#: a module not measured yet counts as a middling one
UNMEASURED_S = 30.0


def _weights() -> dict[str, float]:
    try:
        return json.loads(WEIGHTS_FILE.read_text())
    except (OSError, ValueError):
        return {}


def _scope(item) -> str:
    """The unit a worker gets: the item's xdist_group, else its file."""
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    return "_".join(groups) if groups else item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group markers added here
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # only where a scheduler hands modules out
        return
    weights = _weights()
    per_module: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        per_module[module] = per_module.get(module, 0) + 1
        if item.get_closest_marker("spread"):  # each test a unit of its own
            item.add_marker(pytest.mark.xdist_group(f"{module}#{per_module[module]}"))
    scope_of = {id(i): _scope(i) for i in items}
    total: dict[str, float] = {}
    seen: set[tuple[str, str]] = set()
    for item in items:
        scope, module = scope_of[id(item)], item.nodeid.split("::", 1)[0]
        share = 1 / per_module[module] if item.get_closest_marker("spread") else 1.0
        if (scope, module) not in seen:
            seen.add((scope, module))
            total[scope] = total.get(scope, 0.0) + weights.get(module, UNMEASURED_S) * share
    first = {}
    for n, item in enumerate(items):
        first.setdefault(scope_of[id(item)], n)
    items.sort(key=lambda i: (-total[scope_of[id(i)]], first[scope_of[id(i)]]))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``: modules (or xdist groups) in the collection's order,
    longest first (above)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            test = nodeid.split("::", 1)
            if len(test) == 2 and "@" in test[1]:  # --dist loadgroup's suffix: the group
                return nodeid.rsplit("@", 1)[1]
            return test[0]

    config.option.loadscopereorder = False  # keep the order above, not by test count
    return ModuleScheduling(config, log)


# ------------------------------------------------------------------ shared real clusters
@pytest.fixture(scope="session")
def shared_local(tmp_path_factory):
    """One local control plane for the whole run (per xdist worker): modules take it through
    ``realcluster.shared_lab``, which empties it with ``reset()`` first, as a learner's next
    lesson would. Modules that test the lab's own life (up, down, repair) make their own."""
    from realcluster import require_controlplane

    import gpu_lab

    require_controlplane()
    session = gpu_lab.connect("local", name="suite", root=tmp_path_factory.mktemp("lab"), timeout=90)
    try:
        yield session
    finally:
        session.close()
        session.cluster.down(progress=None, purge=True)


@pytest.fixture(scope="session")
def shared_kind(tmp_path_factory):
    """One kind cluster for every kind module of the run (xdist_group "kind" keeps them on one
    worker): a worker per node name they use, each module reshaping it to its scenario
    (``KindCluster.up``), as a new cluster would be made, in seconds instead of a minute or
    two. Deleted at the end, with nothing left behind."""
    import subprocess

    from realcluster import KIND_NAME, kind_workers, require_kind

    import gpu_lab
    from gpu_lab.backends.kind import commands as cmd

    require_kind()
    session = gpu_lab.connect("kind", name=KIND_NAME, root=tmp_path_factory.mktemp("kind-home"))
    try:
        session.apply(kind_workers())
        yield session
    finally:
        log = session.cluster.paths["log"]
        if log.exists():  # every docker/kind/kubectl step's output, for a failure's post-mortem
            keep = Path(os.environ.get("GPU_LAB_ARTIFACTS") or tempfile.gettempdir()) / "kind-up.log"
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, keep)
        session.reset()
        session.close()
        session.cluster.down(progress=None, purge=True)
    left = subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.kind.cluster={KIND_NAME}"],
                          capture_output=True, text=True)
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"name={cmd.network(KIND_NAME)}"],
                          capture_output=True, text=True)
    assert left.stdout.strip() == "" and nets.stdout.strip() == "", "kind down left containers or a network"
