"""The gpu-lab command's contract: output shapes, exit codes, one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

SCENARIOS = Path(__file__).parent / "scenarios"


def gpu_lab(*args):
    return subprocess.run([sys.executable, "-m", "gpu_lab.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_run_json_contract():
    r = gpu_lab("run", str(SCENARIOS / "taints_keep_gpu_nodes_for_gpu_pods.yaml"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["backend"] == "sim"
    pods = {p["name"]: p for p in doc["pods"]}
    assert set(pods["infer"]) == {"namespace", "name", "node", "phase", "message", "requests", "devices"}
    assert pods["infer"]["node"] == "gpu-0" and len(pods["infer"]["devices"]["nvidia.com/gpu"]) == 1
    assert pods["forgot-toleration"]["node"] is None
    assert pods["forgot-toleration"]["message"].startswith("0/2 nodes are available")
    assert pods["web"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    node = next(n for n in doc["nodes"] if n["name"] == "gpu-0")
    assert set(node) == {"name", "labels", "capacity", "allocatable", "requested"}
    assert node["allocatable"]["nvidia.com/gpu"] == "4" and node["requested"]["nvidia.com/gpu"] == "1"
    assert node["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L4"


def test_run_table_names_pending_reasons():
    r = gpu_lab("run", str(SCENARIOS / "insufficient_gpu.yaml"))
    assert r.returncode == 0
    assert "<pending>" in r.stdout and "2 Insufficient nvidia.com/gpu" in r.stdout


def test_explain_json_has_filters_and_scores():
    r = gpu_lab("explain", str(SCENARIOS / "default_spreads_by_cpu.yaml"), "default/" + "x", "--json")
    assert r.returncode == 2 and r.stderr.startswith("error: pods ")
    run = json.loads(gpu_lab("run", str(SCENARIOS / "default_spreads_by_cpu.yaml"), "--json").stdout)
    pod = run["pods"][1]["name"]
    r = gpu_lab("explain", str(SCENARIOS / "default_spreads_by_cpu.yaml"), f"default/{pod}", "--json")
    doc = json.loads(r.stdout)
    assert doc["node"] in ("h100-0", "h100-1")
    node = next(n for n in doc["nodes"] if n["name"] == doc["node"])
    assert node["filters"]["NodeResourcesFit"] == "passed"
    assert set(node["scores"]["NodeResourcesFit"]) == {"raw", "normalized", "weighted"}
    assert node["total"] == sum(v["weighted"] for v in node["scores"].values())


def test_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                   "  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 0.5}}}\n")
    r = gpu_lab("run", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: Pod "p" is invalid: ')
    assert "must be an integer" in lines[0]
    r = gpu_lab("run", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_bench_reports_its_figures():
    r = gpu_lab("bench", "--nodes", "20", "--pods", "100", "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["pods"] == 100 and doc["bound"] + doc["pending"] == 100
    assert doc["pods_per_second"] > 0 and doc["peak_rss_mb"] > 0 and doc["record"] is True
    assert doc["repeat"] == 3 and sorted(doc["runs_total_seconds"])[1] == doc["total_seconds"]
    steps = sum(doc[f"{k}_seconds"] for k in ("read", "apply", "schedule", "table"))
    assert abs(steps - doc["total_seconds"]) < 0.01  # the headline is the whole path, file to table
    assert 0 < doc["reference_loop_seconds"] < 10


def test_bench_scaling_prints_each_steps_growth_and_refuses_a_bad_size():
    r = gpu_lab("bench", "--scaling", "20x50,20x500", "--json")
    doc = json.loads(r.stdout)
    assert (doc["small"]["pods"], doc["large"]["pods"], doc["pods_factor"], doc["limit"]) == (50, 500, 10.0, 15.0)
    assert set(doc["growth"]) == {"read", "apply", "schedule", "table", "total"}
    assert r.returncode == (1 if doc["too_fast_growing"] else 0)
    r = gpu_lab("bench", "--scaling", "20x50")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --scaling wants two NODESxPODS sizes, e.g. 1000x2000,1000x20000 (got '20x50')"]


FIRST = Path(__file__).parents[1] / "lessons" / "scenarios" / "first_cluster.yaml"


def test_run_and_explain_fit_100_columns_unless_wide():
    run = gpu_lab("run", str(FIRST))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "NODE", "PHASE", "GPUS", "DEVICES"]
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    train = next(line for line in lines if " train-0 " in line)
    assert ",+1" in train and train.count("GPU-") == 3  # 4 GPUs: three short IDs, then +1
    wide = gpu_lab("run", str(FIRST), "--wide").stdout
    full = json.loads(gpu_lab("run", str(FIRST), "--json").stdout)
    ids = next(p for p in full["pods"] if p["name"] == "train-0")["devices"]["nvidia.com/gpu"]
    assert ",".join(ids) in wide and max(map(len, wide.splitlines())) > 100
    for pod in ("default/forgot-toleration", "default/train-0"):
        ex = gpu_lab("explain", str(FIRST), pod)
        assert ex.returncode == 0, ex.stderr
        assert max(map(len, ex.stdout.splitlines())) <= 100, ex.stdout
    ex = gpu_lab("explain", str(FIRST), "default/forgot-toleration").stdout
    assert "h100-0  rejected by TaintToleration: node(s) had untolerated taint(s)" in ex
    scored = gpu_lab("explain", str(FIRST), "default/train-0").stdout
    assert "tie between" in scored and "\ntotal " in scored
    assert "NodeUnschedulable" in gpu_lab("explain", str(FIRST), "default/train-0", "--wide").stdout


def test_a_closed_pipe_ends_quietly():
    # the reader is gone before the first line is written (`gpu-lab run ... | head -0`)
    proc = subprocess.Popen([sys.executable, "-m", "gpu_lab.cli", "run", str(FIRST)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err
