import re

import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.catalog import MODELS
from gpu_lab.gpus.labels import Sharing, gfd_labels, gpu_node_state, parse_sharing
from gpu_lab.gpus.mig import validate_layout
from gpu_lab.gpus.migparted import resolve
from gpu_lab.names import stable_uid

T4_WHOLE = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "Tesla-T4",
    "nvidia.com/gpu.memory": "15360",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.family": "turing",
    "nvidia.com/gpu.compute.major": "7",
    "nvidia.com/gpu.compute.minor": "5",
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/gpu.mode": "compute",
    "nvidia.com/mig.capable": "false",
    "nvidia.com/mps.capable": "false",
}


def test_whole_t4():
    assert gfd_labels(MODELS["T4"], 1) == T4_WHOLE


def test_whole_h100_node_by_alias():
    labels = gfd_labels("h100", 8)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("9", "0")
    assert labels["nvidia.com/mig.capable"] == "true"
    # GFD writes mig.strategy only for single/mixed
    assert "nvidia.com/mig.strategy" not in labels
    assert "nvidia.com/gpu.machine" not in labels


@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_mig_strategy_label_on_whole_gpus(strategy):
    labels = gfd_labels("A100-40GB", 8, mig_strategy=strategy)
    assert labels["nvidia.com/mig.strategy"] == strategy
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"  # no MIG devices: unchanged
    assert labels["nvidia.com/gpu.count"] == "8"


def test_time_slicing_shorthand():
    labels = gfd_labels("T4", 1, replicas=4, sharing_strategy="time-slicing")
    assert labels == {
        **T4_WHOLE,
        "nvidia.com/gpu.product": "Tesla-T4-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }
    # count stays the number of physical GPUs
    assert labels["nvidia.com/gpu.count"] == "1"


def test_time_slicing_from_device_plugin_config():
    cfg = {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}
    labels = gfd_labels("H100-80GB", 8, sharing=cfg)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert labels["nvidia.com/gpu.replicas"] == "10"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_rename_by_default_keeps_plain_product():
    cfg = {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    labels = gfd_labels("T4", 2, sharing=cfg)
    assert labels["nvidia.com/gpu.product"] == "Tesla-T4"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_mps_sharing():
    cfg = {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}
    labels = gfd_labels("L4", 1, sharing=cfg)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/mps.capable"] == "true"


def test_machine_label_is_sanitised():
    assert gfd_labels("A10G", 1, machine="g5.2xlarge")["nvidia.com/gpu.machine"] == "g5.2xlarge"
    assert gfd_labels("H100", 8, machine="DGX H100")["nvidia.com/gpu.machine"] == "DGX-H100"


def test_no_gpus_no_labels():
    assert gfd_labels("T4", 0) == {}


def test_parse_sharing_defaults():
    assert parse_sharing(None) == Sharing()
    assert parse_sharing({}) == Sharing()
    ts = parse_sharing({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}})
    assert ts == Sharing("time-slicing", 3, False, False)
    assert ts.resource == "nvidia.com/gpu" and ts.shared
    mps = parse_sharing({"mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}})
    assert mps == Sharing("mps", 2, True, True)  # MPS rejects requests > 1 unless relaxed
    assert mps.resource == "nvidia.com/gpu.shared"
    # only MIG resources replicated: whole GPUs are not shared, the MIG resource is
    only_mig = parse_sharing({"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}})
    assert (only_mig.strategy, only_mig.replicas, only_mig.shared) == ("time-slicing", 1, False)
    assert only_mig.replicas_for("nvidia.com/mig-1g.10gb") == 2
    assert only_mig.replicas_for("nvidia.com/gpu") == 1
    assert only_mig.resource == "nvidia.com/gpu"


@pytest.mark.parametrize(
    "cfg, message",
    [
        ([], "sharing: must be a mapping"),
        ({"timeslicing": {}}, 'sharing: unknown field "timeslicing" (known: mps, timeSlicing)'),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
          "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
         "sharing: timeSlicing and mps are mutually exclusive"),
        ({"timeSlicing": {}}, "sharing.timeSlicing.resources: no resources specified"),
        ({"timeSlicing": {"resources": []}}, "sharing.timeSlicing.resources: no resources specified"),
        ({"timeSlicing": {"resources": [{"replicas": 2}]}},
         "sharing.timeSlicing.resources[0].name: no resource name specified"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu"}]}},
         "sharing.timeSlicing.resources[0].replicas: no replicas specified"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}},
         "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": "4"}]}},
         "sharing.timeSlicing.resources[0].replicas: must be an integer"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "rename": "x"}]}},
         "sharing.timeSlicing.resources[0].rename: not supported (sharing applies to every GPU of the node)"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "devices": [0]}]}},
         "sharing.timeSlicing.resources[0].devices: not supported (sharing applies to every GPU of the node)"),
        ({"mps": {"renameByDefault": "yes", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
         "sharing.mps.renameByDefault: must be true or false"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpus", "replicas": 2}]}},
         'sharing.timeSlicing.resources[0].name: unsupported resource "nvidia.com/gpus" '
         "(nvidia.com/gpu or nvidia.com/mig-<profile>)"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2},
                                        {"name": "nvidia.com/gpu", "replicas": 3}]}},
         'sharing.timeSlicing.resources[1].name: resource "nvidia.com/gpu" is listed twice'),
    ],
)
def test_parse_sharing_errors(cfg, message):
    with pytest.raises(GpuLabError) as exc:
        parse_sharing(cfg)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"count": -1}, "GPU count must be a non-negative integer, got -1"),
        ({"count": 1.5}, "GPU count must be a non-negative integer, got 1.5"),
        ({"count": 1, "mig_strategy": "all"}, 'unknown MIG strategy "all" (choose from none, single, mixed)'),
        ({"count": 1, "sharing_strategy": "mig", "replicas": 2},
         'unknown sharing strategy "mig" (choose from none, time-slicing, mps)'),
        ({"count": 1, "sharing_strategy": "time-slicing"}, 'sharing strategy "time-slicing" needs replicas >= 2'),
        ({"count": 1, "replicas": 4}, 'sharing strategy "none" needs replicas of 1'),
        ({"count": 1, "replicas": 0, "sharing_strategy": "mps"}, "replicas must be a positive integer, got 0"),
        ({"count": 1, "replicas": 2, "sharing_strategy": "mps", "sharing": Sharing("mps", 2)},
         "give either sharing or replicas/sharing_strategy, not both"),
    ],
)
def test_gfd_labels_errors(kwargs, message):
    with pytest.raises(GpuLabError) as exc:
        gfd_labels("T4", **kwargs)
    assert str(exc.value) == message


def test_unknown_model_error_passes_through():
    with pytest.raises(GpuLabError, match='unknown GPU model "V100"'):
        gfd_labels("V100", 1)


# ------------------------------------------------------------------ MIG (GFD mig-strategy.go / resource.go)
MIG_UUID = r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
A100_BASE = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.mode": "compute",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mps.capable": "false",
    "nvidia.com/gpu.family": "ampere",
    "nvidia.com/gpu.compute.major": "8",
    "nvidia.com/gpu.compute.minor": "0",
}


def test_mixed_strategy_labels_resources_and_ids():
    state = gpu_node_state("a100-0", "A100-40GB", 2, mig_strategy="mixed",
                           mig_layouts=resolve("A100-40GB", 2, "all-balanced"))
    assert state.capacity == {"nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-2g.10gb": 2, "nvidia.com/mig-1g.5gb": 4}
    assert state.labels == {
        **A100_BASE,
        # whole-GPU labels: every GPU counts; MIG-enabled GPUs carry no sharing (replicas 0)
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "40960",
        "nvidia.com/mig.strategy": "mixed",
        **{f"nvidia.com/mig-{p}.{k}": v for p, attrs in {
            "3g.20gb": {"count": "2", "memory": "19968", "multiprocessors": "42", "slices.gi": "3", "slices.ci": "3",
                        "engines.copy": "3", "engines.decoder": "2"},
            "2g.10gb": {"count": "2", "memory": "9856", "multiprocessors": "28", "slices.gi": "2", "slices.ci": "2",
                        "engines.copy": "2", "engines.decoder": "1"},
            "1g.5gb": {"count": "4", "memory": "4864", "multiprocessors": "14", "slices.gi": "1", "slices.ci": "1",
                       "engines.copy": "1", "engines.decoder": "0"},
        }.items() for k, v in {**attrs, "product": f"NVIDIA-A100-SXM4-40GB-MIG-{p}", "replicas": "1",
                               "sharing-strategy": "none", "engines.encoder": "0", "engines.jpeg": "0",
                               "engines.ofa": "0"}.items()},
    }
    ids = [i for ids in state.devices.values() for i in ids]
    assert len(ids) == len(set(ids)) == 8
    assert all(re.match(MIG_UUID, i) for i in ids)
    # GPU 0's 1g.5gb instances sit at memory slices 2 and 3 (2g.10gb at 0-1, 3g.20gb at 4-7)
    assert str(validate_layout("A100-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1})) == (
        "2g.10gb@0-1, 1g.5gb@2, 1g.5gb@3, 3g.20gb@4-7")
    assert state.devices["nvidia.com/mig-1g.5gb"][:2] == [
        f"MIG-{stable_uid('a100-0', '0', '1g.5gb', '2')}", f"MIG-{stable_uid('a100-0', '0', '1g.5gb', '3')}"]
    assert state.warnings == ()
    again = gpu_node_state("a100-0", "A100-40GB", 2, mig_strategy="mixed",
                           mig_layouts=resolve("A100-40GB", 2, "all-balanced"))
    assert again.devices == state.devices


def test_mixed_strategy_keeps_whole_gpus_without_mig():
    state = gpu_node_state("n", "H100-80GB", 3, mig_strategy="mixed",
                           mig_layouts=[{"1g.10gb+me": 1}, None, None])
    assert state.capacity == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb.me": 1}
    assert state.devices["nvidia.com/gpu"] == [f"GPU-{stable_uid('n', '1')}", f"GPU-{stable_uid('n', '2')}"]
    assert state.labels["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"
    assert state.labels["nvidia.com/mig-1g.10gb.me.engines.ofa"] == "1"
    # a GPU without MIG is present: the whole-GPU labels carry sharing again (replicas 1)
    assert state.labels["nvidia.com/gpu.replicas"] == "1"
    assert state.labels["nvidia.com/gpu.count"] == "3"


def test_single_strategy_advertises_instances_as_gpus():
    state = gpu_node_state("n", "A100-40GB", 8, mig_strategy="single",
                           mig_layouts=resolve("A100-40GB", 8, "all-1g.5gb"))
    assert state.capacity == {"nvidia.com/gpu": 56}
    assert state.labels == {
        **A100_BASE,
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "4864",
        "nvidia.com/gpu.multiprocessors": "14",
        "nvidia.com/gpu.slices.gi": "1",
        "nvidia.com/gpu.slices.ci": "1",
        "nvidia.com/gpu.engines.copy": "1",
        "nvidia.com/gpu.engines.decoder": "0",
        "nvidia.com/gpu.engines.encoder": "0",
        "nvidia.com/gpu.engines.jpeg": "0",
        "nvidia.com/gpu.engines.ofa": "0",
        "nvidia.com/mig.strategy": "single",
    }
    assert all(i.startswith("MIG-") for i in state.devices["nvidia.com/gpu"])


@pytest.mark.parametrize("layouts, problem", [
    ([{"1g.5gb": 2, "3g.20gb": 1}] * 2, "more than one MIG device type present on node"),
    ([{"1g.5gb": 7}, None], "devices with MIG enabled and disable detected"),
    ([{}, {}], "at least one MIG device is enabled but empty"),
])
def test_single_strategy_invalid_configs(layouts, problem):
    state = gpu_node_state("n", "A100-40GB", 2, mig_strategy="single", mig_layouts=layouts)
    assert state.capacity == {} and state.devices == {}
    assert {k: state.labels[k] for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.count",
                                          "nvidia.com/gpu.replicas", "nvidia.com/gpu.memory")} == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID", "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.memory": "0"}
    assert state.warnings == (f"migStrategy single: {problem}; GFD labels the node NVIDIA-A100-SXM4-40GB-MIG-INVALID "
                              "and the device plugin advertises no GPUs",)


def test_mixed_strategy_with_an_empty_mig_gpu_advertises_nothing():
    state = gpu_node_state("n", "H100-80GB", 2, mig_strategy="mixed", mig_layouts=[{}, {"7g.80gb": 1}])
    assert state.capacity == {}
    assert "GPU 0 has MIG enabled but no MIG devices; the device plugin fails to start" in state.warnings[0]


def test_none_strategy_still_advertises_mig_enabled_gpus():
    state = gpu_node_state("n", "H100-80GB", 2, mig_strategy="none",
                           mig_layouts=resolve("H100-80GB", 2, "all-balanced"))
    assert state.capacity == {"nvidia.com/gpu": 2}
    assert state.labels["nvidia.com/gpu.replicas"] == "0"
    assert "nvidia.com/mig.strategy" not in state.labels
    assert not any(k.startswith("nvidia.com/mig-") for k in state.labels)
    assert state.warnings == ("migStrategy none: GPUs 0, 1 have MIG enabled; the device plugin still advertises "
                              "them as nvidia.com/gpu, but a container given one sees no usable CUDA device "
                              "(no MIG device is exposed to it)",)


def test_time_slicing_mig_resources():
    sharing = {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 3}]}}
    state = gpu_node_state("n", "H100-80GB", 1, sharing=sharing, mig_strategy="mixed",
                           mig_layouts=[{"1g.10gb": 2, "3g.40gb": 1}])
    assert state.capacity == {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 6}
    assert state.devices["nvidia.com/mig-1g.10gb"][0].endswith("::0")
    assert state.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"
    assert state.labels["nvidia.com/mig-1g.10gb.replicas"] == "3"
    assert state.labels["nvidia.com/mig-1g.10gb.sharing-strategy"] == "time-slicing"
    assert state.labels["nvidia.com/mig-3g.40gb.replicas"] == "1"

    renamed = {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}
    single = gpu_node_state("n", "H100-80GB", 1, sharing=renamed, mig_strategy="single",
                            mig_layouts=[{"3g.40gb": 2}])
    assert single.capacity == {"nvidia.com/gpu.shared": 4}
    assert single.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert single.labels["nvidia.com/gpu.replicas"] == "2"


def test_mps_is_not_offered_on_mig_gpus():
    mps = {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}
    state = gpu_node_state("n", "H100-80GB", 1, sharing=mps, mig_strategy="single", mig_layouts=[{"7g.80gb": 1}])
    assert state.capacity == {}
    assert state.warnings[-1].startswith("MPS sharing is not supported for MIG devices")


def test_mig_strategies_on_gpus_without_mig():
    for strategy in ("single", "mixed"):
        state = gpu_node_state("n", "L4", 2, mig_strategy=strategy)
        assert state.capacity == {"nvidia.com/gpu": 2}
        assert state.labels["nvidia.com/mig.strategy"] == strategy
        assert state.labels["nvidia.com/mig.capable"] == "false"


def test_gfd_labels_take_mig_layouts():
    labels = gfd_labels("H200", 8, mig_strategy="single", mig_layouts=[{"1g.18gb": 7}] * 8)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-1g.18gb"
    assert labels["nvidia.com/gpu.count"] == "56"
    assert labels["nvidia.com/gpu.memory"] == "16384"


@pytest.mark.parametrize("kwargs, message", [
    ({"model": "T4", "mig_layouts": [{"1g.5gb": 1}]}, "T4 GPUs do not support MIG"),
    ({"model": "A100-40GB", "mig_layouts": [None, None]}, "MIG layouts: 2 given for 1 GPUs"),
    ({"model": "A100-40GB", "mig_layouts": [{"4g.20gb": 2}]},
     "only one 4g.20gb fits on an A100-40GB (max 1 instance: it can only start at memory slice 0); asked for 2"),
])
def test_mig_layout_errors(kwargs, message):
    with pytest.raises(GpuLabError) as exc:
        gpu_node_state("n", count=1, mig_strategy="mixed", **kwargs)
    assert str(exc.value) == message
