"""dcgm-exporter's /metrics text: names, HELP/TYPE, label order, pod mapping, idle GPUs, sharing, MIG."""

import pytest

import gpu_lab
from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.metrics import GpuNode, GpuUse, dcgm_text
from gpu_lab.metrics.exporter import NVML_NAMES

H100 = gpu_lab.gpus.get_model("H100-80GB")


def use(pod, gpu, device, util=20.0, mem=12288.0, **kw):
    kw.setdefault("model", "H100-80GB")
    kw.setdefault("node", "h100-0")
    return GpuUse(kw.pop("namespace", "default"), pod, kw.pop("container", "srv"), gpu=gpu,
                  device_id=device, utilization=util, memory_mib=mem, **kw)


def lines(text, name):
    return [ln for ln in text.splitlines() if ln.startswith(name + "{")]


def test_one_gpu_is_rendered_exactly_as_the_exporter_writes_it():
    text = dcgm_text([use("chat", 0, "GPU-aaa", namespace="team-a")], driver_version="570.124.06")
    labels = ('gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:01:00.0",device="nvidia0",'
              'modelName="NVIDIA H100 80GB HBM3",Hostname="h100-0",DCGM_FI_DRIVER_VERSION="570.124.06",'
              'container="srv",namespace="team-a",pod="chat"')
    assert text == (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 20\n"
        "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
        f"DCGM_FI_DEV_FB_FREE{{{labels}}} {H100.memory_mib - 12288}\n"
        "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        f"DCGM_FI_DEV_FB_USED{{{labels}}} 12288\n"
        "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n"
        "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.200000\n")


def test_unallocated_gpus_show_zero_and_no_pod_labels():
    text = dcgm_text([use("chat", 1, "GPU-bbb")], [GpuNode("h100-0", "H100-80GB", 4)], profiling=False)
    util = lines(text, "DCGM_FI_DEV_GPU_UTIL")
    assert [ln.split('gpu="')[1].split('"')[0] for ln in util] == ["0", "1", "2", "3"]
    idle = [ln for ln in util if 'pod="' not in ln]
    assert len(idle) == 3 and all(ln.endswith(" 0") for ln in idle)
    assert all("namespace=" not in ln and "container=" not in ln for ln in idle)
    assert sum('pod="chat"' in ln for ln in util) == 1
    free = [ln for ln in lines(text, "DCGM_FI_DEV_FB_FREE") if 'pod="' not in ln]
    assert all(ln.endswith(f" {H100.memory_mib}") for ln in free)
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in text
    # an idle GPU's UUID is gpu-lab's stable fake, the one the sim's device plugin hands out
    uuids = gpu_uuids("h100-0", 4)
    assert f'UUID="{uuids[0]}"' in util[0] and f'UUID="{uuids[3]}"' in util[3]


def test_time_sliced_gpu_is_one_series_attributed_to_the_last_pod_listed():
    ts = {"sharing": "time-slicing", "replicas": 4, "model": "L4", "node": "l4-0"}
    text = dcgm_text([use("nb1", 0, "GPU-x::0", 30, 8000, **ts), use("nb2", 0, "GPU-x::1", 20, 6000, **ts)])
    (util,) = lines(text, "DCGM_FI_DEV_GPU_UTIL")
    assert 'UUID="GPU-x"' in util and 'pod="nb2"' in util and 'pod="nb1"' not in util
    assert util.endswith(" 50") and 'modelName="NVIDIA L4"' in util
    (used,) = lines(text, "DCGM_FI_DEV_FB_USED")
    assert used.endswith(" 14000")
    # more busy time than the GPU has: it is busy all the time, not 130 %
    busy = dcgm_text([use("a", 0, "GPU-y::0", 70, 1, **ts), use("b", 0, "GPU-y::1", 60, 1, **ts)])
    assert lines(busy, "DCGM_FI_DEV_GPU_UTIL")[0].endswith(" 100")


def test_mig_instances_have_gpu_instance_labels_and_no_gpu_util():
    mig = {"sharing": "mig", "model": "A100-80GB", "node": "a100-0"}
    text = dcgm_text([use("s1", 0, "MIG-1", 40, 5000, mig_profile="1g.10gb", gpu_instance_id=9, **mig),
                      use("s2", 0, "MIG-2", 70, 15000, mig_profile="2g.20gb", gpu_instance_id=5, **mig)])
    assert "DCGM_FI_DEV_GPU_UTIL" not in text  # NVML has no utilisation for MIG devices
    engine = lines(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert [ln.split('GPU_I_ID="')[1].split('"')[0] for ln in engine] == ["5", "9"]
    assert ('modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="2g.20gb",GPU_I_ID="5",Hostname="a100-0",'
            'container="srv",namespace="default",pod="s2"} 0.700000') in engine[0]
    assert 'gpu="0"' in engine[1] and 'device="nvidia0"' in engine[1] and engine[1].endswith(" 0.400000")
    assert lines(text, "DCGM_FI_DEV_FB_USED")[1].endswith(" 5000")


def test_undeclared_fields_are_left_out_as_dcgm_blanks_are():
    text = dcgm_text([use("mystery", 0, "GPU-a", util=None, mem=None)])
    assert text == ""
    only_mem = dcgm_text([use("m", 0, "GPU-a", util=None, mem=100)])
    assert "DCGM_FI_DEV_GPU_UTIL" not in only_mem and lines(only_mem, "DCGM_FI_DEV_FB_USED")


def test_model_name_hostname_and_options():
    for model, nvml in NVML_NAMES.items():
        # GFD's product label is the NVML name with blanks turned into "-" (catalog.py)
        assert nvml.replace(" ", "-") == gpu_lab.gpus.get_model(model).product
    assert set(NVML_NAMES) == set(gpu_lab.gpus.MODELS)
    text = dcgm_text([use("c", 0, "GPU-a")], replace_blanks=True, hostname_label="hostname")
    assert 'modelName="NVIDIA-H100-80GB-HBM3",hostname="h100-0"' in text and "Hostname" not in text
    with pytest.raises(GpuLabError, match="hostname_label"):
        dcgm_text([], hostname_label="host")


def test_prometheus_parser_reads_it_back():
    parser = pytest.importorskip("prometheus_client.parser")
    text = dcgm_text([use("chat", 0, "GPU-a", 35, 2048)], [GpuNode("h100-0", "H100-80GB", 2)])
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert set(families) == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    util = families["DCGM_FI_DEV_GPU_UTIL"]
    assert util.type == "gauge" and util.documentation == "GPU utilization (in %)."
    by_pod = {s.labels.get("pod"): s.value for s in util.samples}
    assert by_pod == {"chat": 35.0, None: 0.0}
    sample = next(s for s in util.samples if s.labels.get("pod") == "chat")
    assert set(sample.labels) == {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                                  "container", "namespace", "pod"}


def test_mig_node_shows_only_the_instances_pods_hold():
    mig = {"sharing": "mig", "model": "A100-80GB", "node": "a100-0", "mig_profile": "1g.10gb"}
    text = dcgm_text([use("s1", 1, "MIG-1", 40, 5000, **mig)], [GpuNode("a100-0", "A100-80GB", 2, mig=True)])
    used = lines(text, "DCGM_FI_DEV_FB_USED")
    assert len(used) == 1 and 'gpu="1"' in used[0] and 'GPU_I_PROFILE="1g.10gb"' in used[0]
    # the same node without mig=True would show its other GPU as an idle whole GPU
    plain = dcgm_text([use("s1", 1, "MIG-1", 40, 5000, **mig)], [GpuNode("a100-0", "A100-80GB", 2)])
    assert len(lines(plain, "DCGM_FI_DEV_FB_USED")) == 2
