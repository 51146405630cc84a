import dataclasses

import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.catalog import MODELS, GpuModel, ReferenceMachine, get_model

KNOWN = "A100-40GB, A100-80GB, A10G, H100-80GB, H200-141GB, L4, L40S, T4"

# name: (product label, gpu.memory MiB, family, compute major, minor, MIG-capable)
EXPECTED = {
    "T4": ("Tesla-T4", 15360, "turing", 7, 5, False),
    "A10G": ("NVIDIA-A10G", 23028, "ampere", 8, 6, False),
    "L4": ("NVIDIA-L4", 23034, "ada-lovelace", 8, 9, False),
    "L40S": ("NVIDIA-L40S", 46068, "ada-lovelace", 8, 9, False),
    "A100-40GB": ("NVIDIA-A100-SXM4-40GB", 40960, "ampere", 8, 0, True),
    "A100-80GB": ("NVIDIA-A100-SXM4-80GB", 81920, "ampere", 8, 0, True),
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", 81559, "hopper", 9, 0, True),
    "H200-141GB": ("NVIDIA-H200", 143771, "hopper", 9, 0, True),
}


def test_models_match_what_gfd_prints():
    assert set(MODELS) == set(EXPECTED)
    for name, (product, mib, family, major, minor, mig) in EXPECTED.items():
        m = MODELS[name]
        assert m.name == name
        assert (m.product, m.memory_mib, m.family, m.compute_major, m.compute_minor, m.mig_capable) == (
            product, mib, family, major, minor, mig)


def test_family_follows_gfd_compute_capability_rule():
    # GFD getArchFamily: 7.5+ turing, 8.0-8.8 ampere, 8.9 ada-lovelace, 9.x hopper
    def family(major, minor):
        if major == 7:
            return "volta" if minor < 5 else "turing"
        if major == 8:
            return "ampere" if minor < 9 else "ada-lovelace"
        return {9: "hopper"}[major]

    for m in MODELS.values():
        assert m.family == family(m.compute_major, m.compute_minor), m.name


def test_prices_are_aws_instance_price_per_gpu():
    h100 = MODELS["H100-80GB"]
    assert h100.price_per_hour == 6.88  # p5.48xlarge $55.04 / 8
    assert MODELS["A100-40GB"].price_per_hour == 2.7447  # p4d.24xlarge $21.957642 / 8
    assert MODELS["A100-80GB"].price_per_hour == 3.4309  # p4de.24xlarge $27.44705 / 8
    assert MODELS["H200-141GB"].price_per_hour == 7.912  # p5en.48xlarge $63.296 / 8
    assert MODELS["T4"].price_per_hour == 0.526  # g4dn.xlarge, one T4
    assert "p5.48xlarge" in h100.price_source
    assert "https://aws.amazon.com/ec2/pricing/on-demand/" in h100.price_source
    for m in MODELS.values():
        assert m.price_per_hour > 0
        assert m.price_date == "2026-09-25"
    cheapest = min(MODELS.values(), key=lambda m: m.price_per_hour)
    assert cheapest.name == "T4"


@pytest.mark.parametrize(
    "alias, name",
    [
        ("h100", "H100-80GB"),
        ("H100", "H100-80GB"),
        ("H100-80GB", "H100-80GB"),
        ("nvidia-h100-80gb-hbm3", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        (" h100 80gb ", "H100-80GB"),
        ("nvidia-h100-80gb", "H100-80GB"),  # GKE accelerator name
        ("Tesla-T4", "T4"),
        ("nvidia-tesla-t4", "T4"),
        ("t4", "T4"),
        ("a100_40gb", "A100-40GB"),
        ("nvidia-tesla-a100", "A100-40GB"),  # GKE calls the 40GB part this
        ("A100-SXM4-80GB", "A100-80GB"),  # older drivers dropped the NVIDIA- prefix
        ("h200", "H200-141GB"),
        ("NVIDIA-H200", "H200-141GB"),
        ("l40s", "L40S"),
        ("NVIDIA-A10G", "A10G"),
    ],
)
def test_aliases_are_case_insensitive(alias, name):
    assert get_model(alias) is MODELS[name]


def test_get_model_passes_models_through():
    m = MODELS["L4"]
    assert get_model(m) is m
    assert str(m) == "L4"


@pytest.mark.parametrize("bad", ["X100", "a100", "", "H100-94GB"])
def test_unknown_model_is_one_line_listing_known(bad):
    with pytest.raises(GpuLabError) as exc:
        get_model(bad)
    assert str(exc.value) == f'unknown GPU model "{bad}" (known: {KNOWN})'


@pytest.mark.parametrize("bad", [None, 3, ["h100"]])
def test_non_string_names_are_refused(bad):
    with pytest.raises(GpuLabError, match="unknown GPU model"):
        get_model(bad)


def test_models_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["T4"].memory_mib = 1  # type: ignore[misc]
    assert isinstance(MODELS["T4"], GpuModel)


# name: (reference instance type, GPUs, vCPUs, memory GiB), the instance each price comes from
REFERENCE = {
    "T4": ("g4dn.xlarge", 1, 4, 16),
    "A10G": ("g5.xlarge", 1, 4, 16),
    "L4": ("g6.xlarge", 1, 4, 16),
    "L40S": ("g6e.xlarge", 1, 4, 32),
    "A100-40GB": ("p4d.24xlarge", 8, 96, 1152),
    "A100-80GB": ("p4de.24xlarge", 8, 96, 1152),
    "H100-80GB": ("p5.48xlarge", 8, 192, 2048),
    "H200-141GB": ("p5en.48xlarge", 8, 192, 2048),
}


def test_every_model_has_the_priced_instance_as_reference_machine():
    assert set(REFERENCE) == set(MODELS)
    for name, (instance, gpus, vcpus, gib) in REFERENCE.items():
        ref = MODELS[name].reference
        assert (ref.instance_type, ref.gpus, ref.vcpus, ref.memory_gib) == (instance, gpus, vcpus, gib), name
        assert f"{instance} " in MODELS[name].price_source  # the same machine the price divides
        assert ref.source.startswith(f"AWS EC2 {instance}: {gpus} GPU")
        assert "https://aws.amazon.com/ec2/instance-types/" in ref.source


@pytest.mark.parametrize(
    "name, gpus, cpu, memory",
    [
        ("H100-80GB", 8, "192", "2048Gi"),  # a whole p5.48xlarge
        ("H100-80GB", 1, "24", "256Gi"),
        ("L4", 4, "16", "64Gi"),  # 4 x g6.xlarge
        ("T4", 1, "4", "16Gi"),
        ("L40S", 2, "8", "64Gi"),
        ("A100-40GB", 4, "48", "576Gi"),
        ("H200-141GB", 8, "192", "2048Gi"),
    ],
)
def test_reference_scales_per_gpu(name, gpus, cpu, memory):
    ref = MODELS[name].reference
    assert (ref.cpu(gpus), ref.memory(gpus)) == (cpu, memory)


def test_fractional_shares_round_up_in_finer_units():
    ref = ReferenceMachine("x.large", 3, 4, 16, "test")
    assert ref.cpu(1) == "1334m"  # 4/3 vCPU
    assert ref.memory(1) == "5462Mi"  # 16/3 GiB
    assert (ref.cpu(3), ref.memory(3)) == ("4", "16Gi")
