"""``gpu-lab probe`` against a fake NVML (``pynvml``) built from the fixtures in
``tests/fixtures/nvml/``: an H100 node and an A100 node with one GPU in MIG mode.

The fixtures are SYNTHETIC (each says so in ``_source``): no GPU machine was available
when they were written. The real-GPU check is still to do: run ``gpu-lab probe --json``
on a borrowed GPU machine and record its output (and NVML's answers) here.

The fake behaves like nvidia-ml-py where the probe relies on it: ``NVMLError`` carries
the return code in ``.value``; a GPU without MIG raises Not Supported from
``nvmlDeviceGetMigMode``; a GPU in MIG mode raises it from
``nvmlDeviceGetUtilizationRates``; an empty MIG slot raises Not Found. It also has the
calls that CHANGE a GPU (MIG mode, GPU instances, clocks, power), which fail the test if
touched; every call goes through a recording wrapper.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
import types
from pathlib import Path

import pytest

from gpu_lab import probe as probe_mod
from gpu_lab.errors import NoDriver
from gpu_lab.gpus.mig import validate_layout
from gpu_lab.probe import READ_ONLY_CALLS, main, mig_memory_gb, probe

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"

ERRORS = {
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    6: "Not Found",
    9: "Driver Not Loaded",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
}
MUTATORS = (
    "nvmlDeviceSetMigMode",
    "nvmlDeviceCreateGpuInstance",
    "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceCreateComputeInstance",
    "nvmlGpuInstanceDestroy",
    "nvmlComputeInstanceDestroy",
    "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetComputeMode",
    "nvmlDeviceSetPowerManagementLimit",
    "nvmlDeviceSetGpuLockedClocks",
    "nvmlDeviceResetGpuLockedClocks",
    "nvmlDeviceSetApplicationsClocks",
    "nvmlDeviceClearEccErrorCounts",
    "nvmlDeviceSetEccMode",
)


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class _Info(types.SimpleNamespace):
    pass


def fake_nvml(machine: dict | None, init_error: int | None = None) -> types.ModuleType:
    """A ``pynvml`` stand-in answering from a fixture dict."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

        def __str__(self):
            return ERRORS.get(self.value, f"NVML Error with code {self.value}")

    m.NVMLError = NVMLError
    state = {"init": 0}

    def gpu(h):
        assert h[0] == "gpu", f"expected a GPU handle, got {h}"
        return machine["gpus"][h[1]]

    def fail(code):
        raise NVMLError(code)

    def nvmlInit():
        if init_error is not None:
            fail(init_error)
        state["init"] += 1

    def nvmlShutdown():
        state["init"] -= 1

    def need_init():
        assert state["init"] > 0, "NVML used before nvmlInit"

    def nvmlSystemGetDriverVersion():
        need_init()
        return machine["driver_version"]

    def nvmlSystemGetCudaDriverVersion():
        return machine["cuda_driver_version"]

    def nvmlSystemGetNVMLVersion():
        return machine["nvml_version"]

    def nvmlDeviceGetCount():
        need_init()
        return len(machine["gpus"])

    def nvmlDeviceGetHandleByIndex(i):
        if not 0 <= i < len(machine["gpus"]):
            fail(2)
        return ("gpu", i)

    def _dev(h):
        if h[0] == "mig":
            return machine["gpus"][h[1]]["mig_devices"][h[2]]
        return gpu(h)

    def nvmlDeviceGetName(h):
        return gpu(h)["name"]

    def nvmlDeviceGetUUID(h):
        return _dev(h)["uuid"]

    def nvmlDeviceGetMemoryInfo(h, version=None):
        return _Info(**_dev(h)["memory"])

    def nvmlDeviceGetCudaComputeCapability(h):
        return tuple(gpu(h)["cuda_compute_capability"])

    def nvmlDeviceGetMigMode(h):
        mode = gpu(h).get("mig_mode")
        return list(mode) if mode is not None else fail(3)

    def nvmlDeviceGetUtilizationRates(h):
        u = gpu(h).get("utilization")
        return _Info(**u) if u is not None else fail(3)

    def nvmlDeviceGetMaxMigDeviceCount(h):
        return gpu(h).get("max_mig_devices", 0) if gpu(h).get("mig_mode") else fail(3)

    def nvmlDeviceGetMigDeviceHandleByIndex(h, j):
        devs = gpu(h).get("mig_devices") or []
        return ("mig", h[1], j) if j < len(devs) else fail(6)

    def nvmlDeviceGetGpuInstanceId(h):
        assert h[0] == "mig"
        return _dev(h)["gpu_instance_id"]

    def nvmlDeviceGetComputeInstanceId(h):
        assert h[0] == "mig"
        return _dev(h)["compute_instance_id"]

    def nvmlDeviceGetAttributes(h):
        assert h[0] == "mig", "attributes are asked of MIG devices only"
        return _Info(**_dev(h)["attributes"])

    def nvmlDeviceGetGpuInstanceById(h, gi_id):
        if not any(g["id"] == gi_id for g in gpu(h).get("gpu_instances") or []):
            fail(6)
        return ("gi", h[1], gi_id)

    def nvmlGpuInstanceGetInfo(gi):
        g = next(x for x in machine["gpus"][gi[1]]["gpu_instances"] if x["id"] == gi[2])
        return _Info(
            device=("gpu", gi[1]),
            id=g["id"],
            profileId=g["profileId"],
            placement=_Info(**g["placement"]),
        )

    def nvmlDeviceGetGpuInstanceProfileInfo(h, profile, version=2):
        info = (gpu(h).get("gpu_instance_profiles") or {}).get(str(profile))
        if info is None:
            fail(3)
        info = dict(info)
        if version == 1 or "name" not in info:
            info.pop("name", None)
        else:
            info["name"] = info["name"].encode()  # c_char array: bytes
        return _Info(**info)

    for f in list(locals().values()):
        if callable(f) and getattr(f, "__name__", "").startswith("nvml"):
            setattr(m, f.__name__, f)

    def mutator(name):
        def f(*a, **k):
            raise AssertionError(f"the probe called {name}, which changes a GPU")

        f.__name__ = name
        return f

    for name in MUTATORS:
        setattr(m, name, mutator(name))
    m._state = state
    return m


class Recorder(types.ModuleType):
    """Wraps a module and records the name of every ``nvml*`` function fetched from it."""

    def __init__(self, inner):
        super().__init__(inner.__name__)
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "calls", [])

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if name.startswith("nvml") and callable(value):

            def call(*a, **k):
                self.calls.append(name)
                return value(*a, **k)

            return call
        return value


def run(machine, **kw):
    rec = Recorder(fake_nvml(machine, **kw))
    return probe(rec), rec


# =========================================================================== read-only


@pytest.mark.parametrize("fixture", ["h100", "a100_mig"])
def test_only_read_calls_reach_nvml(fixture):
    result, rec = run(load(fixture))
    assert result.gpus
    assert rec.calls[0] == "nvmlInit" and rec.calls[-1] == "nvmlShutdown"
    bad = sorted({c for c in rec.calls if not READ_ONLY_CALLS.match(c)})
    assert bad == []
    assert not set(rec.calls) & set(MUTATORS)
    assert rec._inner._state["init"] == 0  # every init has its shutdown


def test_the_module_names_no_nvml_function_but_queries():
    """Statically: every ``nvml*`` name in probe.py, called or quoted, is a query."""
    tree = ast.parse(Path(probe_mod.__file__).read_text())
    api = re.compile(r"^nvml[A-Z]\w*$")  # NVML's C API names (not `self.nvml`, `nvml_version`)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and api.match(node.attr):
            names.add(node.attr)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and api.match(node.value)
        ):
            names.add(node.value)
    assert {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetMigMode", "nvmlGpuInstanceGetInfo"} <= names
    assert sorted(n for n in names if not READ_ONLY_CALLS.match(n)) == []
    for name in MUTATORS:
        assert not READ_ONLY_CALLS.match(name)


def test_the_wrapper_would_see_a_mutation():
    rec = Recorder(fake_nvml(load("h100")))
    with pytest.raises(AssertionError, match="changes a GPU"):
        rec.nvmlDeviceSetMigMode(("gpu", 0), 1)
    assert rec.calls == ["nvmlDeviceSetMigMode"] and not READ_ONLY_CALLS.match(rec.calls[0])


# =========================================================================== what it reports


def test_h100_node():
    result, _ = run(load("h100"))
    assert (result.driver_version, result.cuda_version, result.nvml_version) == (
        "550.54.15",
        "12.4",
        "12.550.54.15",
    )
    g0, g1 = result.gpus
    assert (g0.index, g0.name, g0.uuid) == (
        0,
        "NVIDIA H100 80GB HBM3",
        "GPU-5c1e9a3b-27d4-4f0e-9b6a-0e8d1c2f3a41",
    )
    assert (g0.memory_total_mib, g0.memory_used_mib) == (81559, 4213)
    assert (g0.utilization_gpu, g0.utilization_memory) == (87, 41)
    assert g0.compute_capability == "9.0" and g0.family == "hopper"
    assert g0.mig_capable and g0.mig_mode_current is False and g0.mig_mode_pending is False
    assert g0.mig_devices == [] and g0.mig_single_product_label is None
    # the label GFD writes, and the catalog model it names
    assert g0.product_label == "NVIDIA-H100-80GB-HBM3"
    assert (g0.catalog_model, g0.catalog_match) == ("H100-80GB", "exact")
    assert g1.index == 1 and g1.utilization_gpu == 0
    labels = result.labels()
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "2" and labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == (
        "9",
        "0",
    )
    assert labels["nvidia.com/cuda.driver-version.major"] == "550"


def test_a100_mig_node():
    result, _ = run(load("a100_mig"))
    assert result.cuda_version == "12.2"
    g0, g1 = result.gpus
    assert g0.mig_mode_current and g0.mig_mode_pending
    assert g0.utilization_gpu is None  # NVML reports none for a GPU in MIG mode
    assert any("MIG mode" in n for n in g0.notes)
    got = [
        (
            m.profile,
            m.profile_id,
            m.placement_start,
            m.placement_size,
            m.memory_total_mib,
            m.gpu_instance_id,
            m.compute_instance_id,
        )
        for m in g0.mig_devices
    ]
    assert got == [
        ("3g.20gb", 9, 4, 4, 19968, 2, 0),
        ("2g.10gb", 14, 0, 2, 9856, 5, 0),
        ("1g.5gb", 19, 2, 1, 4864, 13, 0),
        ("1g.5gb", 19, 3, 1, 4864, 14, 0),
    ]
    assert [m.uuid[:4] for m in g0.mig_devices] == ["MIG-"] * 4
    assert g0.mig_devices[0].multiprocessors == 42
    # what it found is a layout gpu-lab's own MIG model accepts, on the same slots
    placement = validate_layout(g0.catalog_model, [m.profile for m in g0.mig_devices])
    assert placement is not None
    assert g0.mig_single_product_label is None  # three profiles: not a single-strategy layout
    # GPU 1: MIG enabled after the next GPU reset
    assert g1.mig_mode_current is False and g1.mig_mode_pending is True and g1.mig_devices == []
    assert (g1.catalog_model, g1.product_label) == ("A100-40GB", "NVIDIA-A100-SXM4-40GB")
    assert "pending: enabled after a GPU reset" in str(result)


def test_profile_names_without_nvml_names_follow_go_nvlib():
    """Drivers without profile info v2 give no names: they are derived from slices and
    memory as NVIDIA's go-nvlib does, and come out the same."""
    machine = load("a100_mig")
    for info in machine["gpus"][0]["gpu_instance_profiles"].values():
        info.pop("name")
    result, _ = run(machine)
    assert [m.profile for m in result.gpus[0].mig_devices] == [
        "3g.20gb",
        "2g.10gb",
        "1g.5gb",
        "1g.5gb",
    ]
    # +me comes from the profile index (NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)
    machine["gpus"][0]["gpu_instances"][2]["profileId"] = 20
    result, _ = run(machine)
    assert result.gpus[0].mig_devices[2].profile == "1g.5gb+me"


@pytest.mark.parametrize(
    ("total_mib", "mig_mib", "gb"),
    [
        (40960, 4864, 5),
        (40960, 9856, 10),
        (40960, 19968, 20),
        (40960, 40192, 40),
        (81559, 9984, 10),
        (81559, 20096, 20),
        (81559, 40448, 40),
        (81559, 81152, 80),
        (143771, 16384, 18),
        (143771, 33280, 35),
        (143771, 66816, 71),
        (143771, 143360, 141),
    ],
)
def test_mig_memory_gb_matches_nvidias_profile_names(total_mib, mig_mib, gb):
    assert mig_memory_gb(total_mib * 1024 * 1024, mig_mib) == gb


def test_single_strategy_label_when_one_profile():
    machine = load("a100_mig")
    gpu0 = machine["gpus"][0]
    gpu0["gpu_instances"] = [
        {"id": 7 + i, "profileId": 19, "placement": {"start": i, "size": 1}} for i in range(7)
    ]
    gpu0["mig_devices"] = [
        {**copy.deepcopy(gpu0["mig_devices"][2]), "gpu_instance_id": 7 + i, "uuid": f"MIG-{i}"}
        for i in range(7)
    ]
    result, _ = run(machine)
    assert result.gpus[0].mig_single_product_label == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_a_gpu_without_mig_and_outside_the_catalog():
    machine = load("h100")
    machine["gpus"] = [
        {
            **machine["gpus"][0],
            "name": "NVIDIA H100 PCIe",
            "mig_mode": None,
            "memory": {"total": 81559 << 20, "used": 0, "free": 81559 << 20},
        },
        {
            **machine["gpus"][0],
            "name": "NVIDIA RTX 6000 Ada Generation",
            "cuda_compute_capability": [8, 9],
            "mig_mode": None,
        },
    ]
    result, _ = run(machine)
    pcie, rtx = result.gpus
    assert pcie.mig_capable is False and pcie.mig_mode_current is None
    assert (pcie.product_label, pcie.catalog_model, pcie.catalog_match) == (
        "NVIDIA-H100-PCIe",
        "H100-80GB",
        "closest",
    )
    assert (rtx.product_label, rtx.catalog_model, rtx.family) == (
        "NVIDIA-RTX-6000-Ada-Generation",
        None,
        "ada-lovelace",
    )
    assert "MIG: not supported" in str(result) and "not in gpu-lab's catalog" in str(result)
    assert result.labels()["nvidia.com/mig.capable"] == "false"


def test_no_permission_for_instance_details_is_a_note_not_a_failure():
    machine = load("a100_mig")
    m = fake_nvml(machine)

    def no_perm(*a):
        raise m.NVMLError(4)

    m.nvmlDeviceGetGpuInstanceById = no_perm
    result = probe(m)
    devs = result.gpus[0].mig_devices
    assert [d.profile for d in devs] == [
        "3g.20gb",
        "2g.10gb",
        "1g.5gb",
        "1g.5gb",
    ]  # from attributes
    assert devs[0].placement_start is None and devs[0].profile_id is None
    assert any("insufficient permissions" in n for n in result.gpus[0].notes)


# =========================================================================== the command


def test_main_text_and_json(capsys):
    assert main([], nvml=fake_nvml(load("a100_mig"))) == 0
    out = capsys.readouterr().out
    assert "driver 535.183.01, CUDA 12.2" in out and "GPU 0: NVIDIA A100-SXM4-40GB" in out
    assert "MIG 0: 3g.20gb  GI 2 CI 0  slices 4+4  19968 MiB" in out
    assert main(["--json"], nvml=fake_nvml(load("h100"))) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["driver_version"] == "550.54.15" and len(doc["gpus"]) == 2
    assert doc["gpus"][0]["product_label"] == "NVIDIA-H100-80GB-HBM3"
    assert doc["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert result_frame_columns_ok(load("h100"))


def result_frame_columns_ok(machine) -> bool:
    df = probe(fake_nvml(machine)).frame()
    return list(df["name"]) == ["NVIDIA H100 80GB HBM3"] * 2 and "mig_devices" in df.columns


@pytest.mark.parametrize(
    ("code", "detail"), [(12, "NVML Shared Library Not Found"), (9, "Driver Not Loaded")]
)
def test_no_driver_is_one_line_and_exit_1(capsys, code, detail):
    assert main([], nvml=fake_nvml(None, init_error=code)) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == f"no NVIDIA driver found: {detail}\n"


def test_no_package_is_one_line_and_exit_1(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(
        NoDriver, match="^no NVIDIA driver found: the NVML bindings are not installed"
    ):
        probe()
    assert main(["--json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("no NVIDIA driver found: ") and err.count("\n") == 1


def test_the_fake_module_is_what_probe_imports(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(load("h100")))
    assert main([]) == 0
    assert "GPU 1: NVIDIA H100 80GB HBM3" in capsys.readouterr().out


def test_zero_gpus_exit_1(capsys):
    machine = {**load("h100"), "gpus": []}
    assert main([], nvml=fake_nvml(machine)) == 1
    assert capsys.readouterr().err == "no NVIDIA GPU found: driver 550.54.15 reports 0 devices\n"


def test_real_bindings_without_a_driver_if_installed(capsys):
    """With nvidia-ml-py installed on a machine without a driver (as in CI)."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - a GPU machine: the probe must succeed read-only
        pynvml.nvmlShutdown()
        rec = Recorder(pynvml)
        probe(rec)
        assert all(READ_ONLY_CALLS.match(c) for c in rec.calls)
        return
    assert main([], nvml=Recorder(pynvml)) == 1
    assert capsys.readouterr().err.startswith("no NVIDIA driver found: ")


def test_fixtures_say_they_are_synthetic():
    for path in FIXTURES.glob("*.json"):
        assert "SYNTHETIC" in json.loads(path.read_text())["_source"], path
