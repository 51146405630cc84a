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
