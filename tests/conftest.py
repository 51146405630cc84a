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
from parallel import unit_of  # noqa: E402  (needs the path above)

# ------------------------------------------------------------------ parallel runs (`-n N`)
# `make test` runs the suite on several xdist workers: a real-cluster test mostly waits (on a
# kubelet, a grace period, a controller), so others run meanwhile. A worker gets a whole unit:
# a module (its fixtures, a control plane or a kind cluster, start once); the modules whose
# module-level ``pytestmark`` names the same ``xdist_group`` together (the kind modules share
# one kind cluster); or single tests of a module marked ``spread`` (independent, long: the lab
# notebooks). The units are read from the source, on the controller that hands them out,
# because it sees only test ids (xdist's own loadgroup suffix no longer reaches it under
# pytest 9.2, whose node ids are read-only). The longest go first, so that none starts last:
# seconds per module from the last measured run, in durations.json
# (benchmarks/suite_times.py --write-weights); a stale file only makes the order worse.
WEIGHTS_FILE = Path(__file__).with_name("durations.json")
#: a module not measured yet counts as a middling one
UNMEASURED_S = 30.0


def _weights() -> dict[str, float]:
    try:
        return json.loads(WEIGHTS_FILE.read_text())
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # only where a scheduler hands units out
        return
    weights, root = _weights(), config.rootpath
    per_module: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        per_module[module] = per_module.get(module, 0) + 1
    unit_of_item = {id(i): unit_of(i.nodeid, root) for i in items}
    total: dict[str, float] = {}
    seen: set[tuple[str, str]] = set()
    for item in items:
        unit, module = unit_of_item[id(item)], item.nodeid.split("::", 1)[0]
        if (unit, module) not in seen:
            seen.add((unit, module))
            share = 1 / per_module[module] if unit == item.nodeid else 1.0
            total[unit] = total.get(unit, 0.0) + weights.get(module, UNMEASURED_S) * share
    first: dict[str, int] = {}
    for n, item in enumerate(items):
        first.setdefault(unit_of_item[id(item)], n)
    items.sort(key=lambda i: (-total[unit_of_item[id(i)]], first[unit_of_item[id(i)]]))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``: whole units (above) in the collection's order, longest first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid, root)

    config.option.loadscopereorder = False  # keep the order above, not by test count
    return UnitScheduling(config, log)


# ------------------------------------------------------------------ shared real clusters
@pytest.fixture(scope="session")
def shared_local(request, tmp_path_factory):
    """One local control plane for the whole run (per xdist worker): modules take it through
    ``realcluster.shared_lab``, which empties it with ``reset()`` first, as a learner's next
    lesson would. Modules that test the lab's own life (up, down, repair) make their own.
    When a test of the run failed, the lab's component logs (their last 16 MiB each) go to
    $GPU_LAB_ARTIFACTS before the lab is deleted: a component that died says why there."""
    from realcluster import keep_logs, require_controlplane

    import gpu_lab

    require_controlplane()
    # the default lab of a private home: a lesson's own connect("local") finds it running
    session = gpu_lab.connect("local", root=tmp_path_factory.mktemp("lab"), timeout=90)
    try:
        yield session
    finally:
        session.close()
        if request.session.testsfailed and (kept := keep_logs(session.cluster.logs_dir, "at-the-end")):
            print(f"the shared lab's logs: {kept}")
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
