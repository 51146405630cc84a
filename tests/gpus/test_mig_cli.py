"""``gpu-lab mig`` entry points: output and exit codes (0 valid, 1 impossible, 2 bad input)."""

import json

import pytest

from gpu_lab.gpus.mig_cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_valid_layout(capsys):
    code, out, err = run(capsys, "validate", "--gpu", "A100-40GB", "1g.5gb", "3g.20gb", "1g.5gb", "2g.10gb")
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "valid: 3g.20gb + 2g.10gb + 1g.5gb x2 on an A100-40GB",
        "placement: 2g.10gb@0-1, 1g.5gb@2, 1g.5gb@3, 3g.20gb@4-7",
        "memory slices: |2g.10gb        |1g.5gb |1g.5gb |3g.20gb                        |",
        "uses 7/7 compute slices, 8/8 memory slices",
    ]


def test_validate_json(capsys):
    code, out, _ = run(capsys, "validate", "--gpu", "h100", "7g.80gb", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] and doc["model"] == "H100-80GB"
    assert doc["slots"] == [{"profile": "7g.80gb", "start": 0, "memorySlices": 8, "computeSlices": 7}]
    code, out, _ = run(capsys, "validate", "--gpu", "h100", "7g.80gb", "1g.10gb", "--json")
    assert code == 1 and json.loads(out)["reason"].startswith("7g.80gb uses the whole GPU")


@pytest.mark.parametrize("profiles, reason", [
    (["4g.20gb", "4g.20gb"],
     "only one 4g.20gb fits on an A100-40GB (max 1 instance: it can only start at memory slice 0); asked for 2"),
    (["1g.5gb"] * 8, "1g.5gb x8 needs 8 compute slices; an A100-40GB has 7"),
    (["7g.40gb", "1g.5gb"],
     "7g.40gb uses the whole GPU and cannot be combined with other instances (asked for 7g.40gb + 1g.5gb)"),
])
def test_validate_impossible_exits_1_with_the_reason(capsys, profiles, reason):
    code, out, err = run(capsys, "validate", "--gpu", "A100-40GB", *profiles)
    assert (code, out, err) == (1, f"impossible: {reason}\n", "")


@pytest.mark.parametrize("argv, message", [
    (["validate", "--gpu", "A100-40GB", "2g.20gb"],
     'error: unknown MIG profile "2g.20gb" for A100-40GB (valid: 7g.40gb, 4g.20gb, 3g.20gb, 2g.10gb, 1g.10gb, '
     "1g.5gb+me, 1g.5gb)\n"),
    (["validate", "--gpu", "V100", "1g.5gb"], 'error: unknown GPU model "V100" (known: A100-40GB, A100-80GB, A10G, '
                                              "H100-80GB, H200-141GB, L4, L40S, T4)\n"),
    (["validate", "--gpu", "T4", "1g.5gb"], "error: T4 GPUs do not support MIG (MIG-capable models: A100-40GB, "
                                            "A100-80GB, H100-80GB, H200-141GB)\n"),
    (["layouts", "--gpu", "L4"], "error: L4 GPUs do not support MIG (MIG-capable models: A100-40GB, A100-80GB, "
                                 "H100-80GB, H200-141GB)\n"),
])
def test_unknown_gpu_or_profile_exits_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", message)


def test_usage_errors_exit_2(capsys):
    code, _, err = run(capsys, "validate", "--gpu", "A100-40GB")
    assert code == 2 and "the following arguments are required: PROFILE" in err
    code, _, err = run(capsys, "shrink")
    assert code == 2 and "invalid choice" in err


def test_layouts_text_and_json(capsys):
    code, out, _ = run(capsys, "layouts", "--gpu", "A100-40GB")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "127 valid MIG layouts on an A100-40GB (44 maximal: nothing more fits)"
    assert lines[2].split() == ["7/7", "8/8", "*7g.40gb", "7g.40gb@0-7"]
    assert len(lines) == 127 + 3
    code, out, _ = run(capsys, "layouts", "--gpu", "A100-40GB", "--json")
    doc = json.loads(out)
    assert len(doc) == 127 and sum(d["maximal"] for d in doc) == 44
    assert doc[0]["profiles"] == ["7g.40gb"] and doc[0]["slots"][0]["start"] == 0
    assert len({tuple(d["profiles"]) for d in doc}) == 127
    code, out, _ = run(capsys, "layouts", "--gpu", "H200-141GB", "--maximal", "--json")
    assert code == 0 and len(json.loads(out)) == 44


def test_plan_text_and_json(capsys, tmp_path):
    f = tmp_path / "services.csv"
    f.write_text("name,memory_gb,compute_slices,replicas\nllama-8b,18,,2\nembed,4,,3\nrerank,9,2,1\nbig,70,,1\n")
    code, out, _ = run(capsys, "plan", str(f), "--gpu", "H100-80GB")
    assert code == 0
    assert out.splitlines()[0] == ("3 H100-80GB GPUs with MIG (optimal; lower bound 3) vs 7 with one whole GPU "
                                   "per replica")
    code, out, _ = run(capsys, "plan", str(f), "--gpu", "H100-80GB", "--json")
    doc = json.loads(out)
    assert doc["gpus"] == 3 and doc["wholeGpus"] == 7 and doc["optimal"]
    assert doc["migParted"]["version"] == "v1" and len(doc["migParted"]["mig-configs"]["planned"]) == 3


def test_plan_bad_csv_exits_2(capsys, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("name,memory_gb\nx,lots\n")
    code, out, err = run(capsys, "plan", str(f), "--gpu", "H100-80GB")
    assert (code, out) == (2, "")
    assert err == f'error: {f}: line 2: memory_gb: must be a positive number, got "lots"\n'


def test_configs(capsys):
    code, out, _ = run(capsys, "configs", "--gpu", "A100-40GB", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["mig-configs"]["all-balanced"][0]["mig-devices"] == {
        "1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    code, out, _ = run(capsys, "configs", "--gpu", "H100-80GB")
    assert code == 0 and out.startswith("version: v1\nmig-configs:\n  all-disabled:\n")
