"""The common mistake, whole GPUs for light inference, and what time-slicing and MIG need instead."""

import pytest

import gpu_lab
from gpu_lab.errors import GpuLabError
from gpu_lab.metrics import GpuUse, right_size

H100 = gpu_lab.gpus.get_model("H100-80GB")


def use(pod, gpu, util, mem, **kw):
    kw.setdefault("model", "H100-80GB")
    kw.setdefault("node", "h100-0")
    return GpuUse("default", pod, "srv", gpu=gpu, device_id=f"GPU-{kw['node']}-{gpu}", utilization=util,
                  memory_mib=mem, **kw)


def chat_fleet():
    # six light inference pods, 10 % to 35 % busy, ~9.8 GiB each, one whole H100 each
    return [use(f"chat-{i}", i, 10 + 5 * i, 10000) for i in range(6)]


def test_hand_worked_fleet_needs_two_gpus_either_way():
    s = right_size(chat_fleet())
    row = s.table.set_index("option")
    assert list(row.index) == ["whole GPUs", "time-slicing", "MIG"]
    assert row.loc["whole GPUs", "gpus"] == 6
    # busy 1.35 GPUs of work in all; one time-sliced GPU delivers 2/2.1 = 0.952:
    # first fit by load: {35, 30, 25} = 0.90, then {20, 15, 10} = 0.45
    assert row.loc["time-slicing", "gpus"] == 2 and row.loc["time-slicing", "setting"] == "replicas: 3"
    # compute slices ceil(7d): 1, 2, 2, 2, 3, 3 = 13 > 7; 10000 MiB is just over a 1g.10gb's 9.75 GiB
    assert row.loc["MIG", "gpus"] == 2
    assert row.loc["MIG", "setting"] == "1 x 1g.20gb, 3 x 2g.20gb, 2 x 3g.40gb"
    assert row.loc["MIG", "gpus_saved"] == 4
    assert row.loc["whole GPUs", "usd_per_hour"] == pytest.approx(6 * H100.price_per_hour, abs=1e-3)
    pods = s.pods.set_index("pod")
    assert pods.loc["chat-5", "compute_slices"] == 3 and pods.loc["chat-0", "mig_profile"] == "1g.20gb"
    assert set(pods.loc[["chat-5", "chat-4", "chat-3"], "timeslice_gpu"]) == {0}
    assert s.gpus("time-slicing") == 2 and s.gpus("MIG", "h100") == 2
    assert "6 pods hold a whole H100-80GB each" in str(s) and "MIG needs 2" in str(s)
    assert s.mig_plans["H100-80GB"].gpu_count == 2


def test_memory_bounds_time_slicing_when_pods_are_idle():
    # 30 GiB each at 5 %: load is no limit, memory is (two fit in 79.6 GiB, three do not)
    s = right_size([use(f"big-{i}", i, 5, 30 * 1024) for i in range(4)])
    assert s.gpus("time-slicing") == 2
    assert s.table.set_index("option").loc["time-slicing", "setting"] == "replicas: 2"


def test_only_light_whole_gpu_pods_count_and_models_stay_apart():
    uses = chat_fleet() + [
        use("busy", 6, 80, 10000),  # above max_util
        use("train", 7, 20, 10000, requested=2),  # multi-GPU: training, not light inference
        use("nb", 0, 10, 1000, sharing="time-slicing", replicas=4, model="L4", node="l4-0"),  # already shared
        GpuUse("default", "undeclared", "srv", "h100-1", "H100-80GB", 0, "GPU-u"),
        use("l4-a", 0, 20, 4000, model="L4", node="l4-1"),
        use("l4-b", 0, 20, 4000, model="L4", node="l4-2"),
    ]
    s = right_size(uses)
    assert set(s.pods["pod"]) == {f"chat-{i}" for i in range(6)} | {"l4-a", "l4-b"}
    l4 = s.table[s.table["model"] == "L4"].set_index("option")
    assert list(l4.index) == ["whole GPUs", "time-slicing"]  # an L4 has no MIG
    assert l4.loc["time-slicing", "gpus"] == 1 and l4.loc["whole GPUs", "gpus"] == 2
    assert s.gpus("whole GPUs") == 8
    assert "busy" in set(right_size(uses, max_util=85).pods["pod"])


def test_headroom_and_nothing_to_fix():
    tight = right_size(chat_fleet(), max_busy=0.5)
    assert tight.gpus("time-slicing") > 2 and tight.gpus("MIG") >= 2
    assert str(right_size([use("busy", 0, 90, 1000)])) == "no pod holds a whole GPU at 50 % busy or less"
    with pytest.raises(GpuLabError, match="max_util"):
        right_size([], max_util=0)
    with pytest.raises(GpuLabError, match="max_busy"):
        right_size([], max_busy=1.5)
