"""Per-(pod, GPU) utilisation and per-pod waste from declared use."""

import math

import pytest

import gpu_lab
from gpu_lab.errors import GpuLabError
from gpu_lab.metrics import GpuUse, utilisation, waste

H100 = gpu_lab.gpus.get_model("H100-80GB")
L4 = gpu_lab.gpus.get_model("L4")


def use(pod, gpu, device, util=None, mem=None, **kw):
    kw.setdefault("model", "H100-80GB")
    kw.setdefault("node", "h100-0")
    return GpuUse(kw.pop("namespace", "default"), pod, "srv", gpu=gpu, device_id=device,
                  utilization=util, memory_mib=mem, **kw)


def test_one_row_per_pod_and_gpu_with_framebuffer_used_and_free():
    uses = [use("chat", 0, "GPU-a", 20, 12288),
            use("train", 1, "GPU-b", 90, 70000, requested=2, namespace="ml"),
            use("train", 2, "GPU-c", 80, 60000, requested=2, namespace="ml")]
    df = utilisation(uses)
    assert len(df) == 3
    assert list(df["pod"]) == ["chat", "train", "train"] and list(df["gpu"]) == [0, 1, 2]
    chat = df.iloc[0]
    assert chat["fb_total_mib"] == H100.memory_mib
    assert chat["fb_used_mib"] == 12288 and chat["fb_free_mib"] == H100.memory_mib - 12288
    assert chat["util_percent"] == 20 and chat["gpus_requested"] == 1
    assert list(df["gpus_requested"]) == [1, 2, 2]
    assert df.iloc[2]["fb_free_mib"] == H100.memory_mib - 60000
    assert chat["uuid"] == "GPU-a" and chat["model"] == "H100-80GB"


def test_waste_is_requested_times_one_minus_util_for_whole_gpus():
    uses = [use("chat", 0, "GPU-a", 20, 12288, hours=3),
            use("train", 1, "GPU-b", 90, 70000, requested=2, hours=2),
            use("train", 2, "GPU-c", 80, 70000, requested=2, hours=2)]
    w = waste(uses).set_index("pod")
    assert w.loc["chat", "gpu_hours_requested"] == 3
    assert w.loc["chat", "gpu_hours_used"] == pytest.approx(0.6)
    assert w.loc["chat", "gpu_hours_wasted"] == pytest.approx(3 * (1 - 0.2))
    assert w.loc["chat", "waste_percent"] == pytest.approx(80)
    assert w.loc["chat", "waste_usd"] == pytest.approx(2.4 * H100.price_per_hour)
    # two GPUs for 2 h: 4 GPU-hours, 0.9*2 + 0.8*2 used
    assert w.loc["train", "gpu_hours_requested"] == 4
    assert w.loc["train", "gpu_hours_wasted"] == pytest.approx(4 - 3.4)
    assert w.loc["train", "util_percent"] == pytest.approx(85) and w.loc["train", "gpus_requested"] == 2
    # a utilisation() table gives the same answer as the records
    assert waste(utilisation(uses)).equals(waste(uses))


def test_undeclared_utilisation_is_unknown_not_idle():
    w = waste([use("mystery", 0, "GPU-a"), use("chat", 1, "GPU-b", 50, 1000)]).set_index("pod")
    assert math.isnan(w.loc["mystery", "gpu_hours_wasted"]) and math.isnan(w.loc["mystery", "util_percent"])
    assert w.loc["mystery", "gpu_hours_requested"] == 1
    assert w.loc["chat", "gpu_hours_wasted"] == pytest.approx(0.5)


def test_time_sliced_pods_share_one_framebuffer_and_a_replica_is_a_fraction():
    ts = {"sharing": "time-slicing", "replicas": 4, "model": "L4", "node": "l4-0"}
    df = utilisation([use("nb1", 0, "GPU-x::0", 30, 8000, **ts), use("nb2", 0, "GPU-x::1", 10, 6000, **ts)])
    assert set(df["fb_free_mib"]) == {L4.memory_mib - 14000}
    assert set(df["uuid"]) == {"GPU-x"}  # the physical GPU behind both replicas
    assert list(df["gpu_share"]) == [0.25, 0.25]
    # each sees the whole GPU: nb2 busy 10 % of an hour uses 0.1 GPU-hours of its 0.25
    w = waste(df).set_index("pod")
    assert w.loc["nb2", "gpu_hours_wasted"] == pytest.approx(0.15)
    assert w.loc["nb1", "gpu_hours_wasted"] == 0  # busier than its share: nothing wasted, never negative


def test_mig_instance_is_its_compute_slices_of_a_gpu():
    mig = {"sharing": "mig", "mig_profile": "3g.40gb", "model": "A100-80GB", "node": "a100-0"}
    df = utilisation([use("svc", 0, "MIG-1", 50, 20000, **mig)])
    row = df.iloc[0]
    prof = gpu_lab.gpus.mig_profiles("A100-80GB")
    total = next(p.memory_mib for p in prof if p.name == "3g.40gb")
    assert row["fb_total_mib"] == total and row["fb_free_mib"] == total - 20000
    assert row["gpu_share"] == pytest.approx(3 / 7)
    assert row["gpu_hours_used"] == pytest.approx(0.5 * 3 / 7)
    assert row["uuid"].startswith("GPU-")  # the parent's UUID, not the MIG device's


@pytest.mark.parametrize("bad, match", [
    ({"model": "A100"}, r"pod chat on h100-0: unknown GPU model"),
    ({"sharing": "vgpu"}, r'unknown sharing "vgpu"'),
    ({"sharing": "mig"}, r"needs mig_profile"),
    ({"sharing": "mig", "mig_profile": "9g.99gb"}, r'unknown MIG profile "9g.99gb"'),
    ({"replicas": 0, "sharing": "time-slicing"}, r"replicas must be an integer >= 1"),
    ({"hours": -1}, r"hours must be a non-negative number"),
])
def test_bad_records_fail_with_one_line_naming_the_pod(bad, match):
    with pytest.raises(GpuLabError, match=match) as err:
        utilisation([use("chat", 0, "GPU-a", 10, 100, **bad)])
    assert "\n" not in str(err.value)


def test_memory_above_the_device_is_refused():
    with pytest.raises(GpuLabError, match=r"declares 30000 MiB of GPU memory but one L4 has 23034 MiB"):
        utilisation([use("big", 0, "GPU-a", 10, 30000, model="L4")])
