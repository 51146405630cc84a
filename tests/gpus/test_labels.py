import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.catalog import MODELS
from gpu_lab.gpus.labels import Sharing, gfd_labels, parse_sharing

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
    # only MIG resources replicated: whole GPUs are not shared
    only_mig = {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}
    assert parse_sharing(only_mig) == Sharing()


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
