"""Golden scenarios: each tests/scenarios/X.yaml has X.expected.yaml saying what must happen and why."""

from collections import Counter
from pathlib import Path

import pytest
import yaml

import gpu_lab

SCENARIOS = Path(__file__).parent.parent / "scenarios"
CASES = sorted(p for p in SCENARIOS.glob("*.yaml") if not p.name.endswith(".expected.yaml"))


def _node_usage(lab):
    nodes = lab.to_dict()["nodes"]
    pods = lab.pods()
    out = {}
    for n in nodes:
        placed = pods[pods["node"] == n["name"]]
        usage = {"pods": int(len(placed))}
        gpus = n["requested"].get("nvidia.com/gpu")
        usage["nvidia.com/gpu"] = int(gpus) if gpus is not None else 0
        out[n["name"]] = usage
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path):
    expected = yaml.safe_load(path.with_name(path.stem + ".expected.yaml").read_text())
    assert expected.get("why"), "every golden scenario says why"
    lab = gpu_lab.connect("sim", seed=expected.get("seed", 0), deterministic=expected.get("deterministic", False))
    lab.apply(path)
    lab.schedule()
    pods = lab.pods().set_index(lab.pods()["namespace"] + "/" + lab.pods()["name"])
    checked = 0
    for key, want in (expected.get("pods") or {}).items():
        row = pods.loc[key]
        if "node" in want:
            assert (row["node"] if isinstance(row["node"], str) else None) == want["node"], key
        if "message" in want:
            assert row["message"] == want["message"], key
        if "phase" in want:
            assert row["phase"] == want["phase"], key
        checked += 1
    if "pending" in expected:
        pending = sorted(pods[pods["phase"] == "Pending"].index)
        assert pending == sorted(expected["pending"])
        checked += 1
    usage = _node_usage(lab)
    for node, want in (expected.get("nodes") or {}).items():
        assert {k: usage[node][k] for k in want} == want, node
        checked += 1
    if "nodes_multiset" in expected:
        want = Counter(tuple(sorted(d.items())) for d in expected["nodes_multiset"])
        keys = {k for d in expected["nodes_multiset"] for k in d}
        got = Counter(tuple(sorted((k, u[k]) for k in keys)) for u in usage.values())
        assert got == want
        checked += 1
    assert checked, "an expectation file must check something"
