"""The autoscaler on the clock: nodes join after provisioningDelay, unneeded GPU nodes leave."""

import pytest

import gpu_lab

from .kit import job

H100 = {"model": "H100-80GB", "count": 8}


def scaling_pool(name="h100", max_count=4, delay="5m", **spec):
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"gpu": H100, "autoscaling": {"minCount": 0, "maxCount": max_count, "provisioningDelay": delay},
                     **spec}}


def at(doc, when):
    doc["metadata"]["annotations"]["gpulab.dev/submit-at"] = when
    return doc


def test_nodes_come_after_the_provisioning_delay_and_go_after_the_unneeded_time():
    r = gpu_lab.simulate([scaling_pool(), job("a", 8, duration="2h"), at(job("b", 4, duration="2h"), "1h")],
                         until="12h")
    jobs = r.jobs.set_index("name")
    assert jobs.loc["a", "started_at"] == 300  # 0 -> 1 node, joined 5 min later
    assert jobs.loc["b", "started_at"] == 3600 + 300  # a second node for b
    s = r.series.set_index("time")
    assert s.loc[3600, "nodes"] == 2  # billed from the request on
    # a's node empties at 2h05 and goes 10 min later (scaleDownUnneededTime); b's at 3h05 + 10 min
    assert s.loc[7500 + 600, "nodes"] == 1 and s.loc[3900 + 7200 + 600, "nodes"] == 0
    assert r.metrics["node_hours"] == pytest.approx((8100 - 0 + 11700 - 3600) / 3600, abs=1e-3)


def test_a_bare_cpu_pod_keeps_a_gpu_node_forever():
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug-shell"},
            "spec": {"containers": [{"name": "sh", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}
    pool = scaling_pool()
    pool["spec"]["autoscaling"]["minCount"] = 0
    pool["spec"]["count"] = 1
    lab = gpu_lab.connect("sim")
    lab.apply([pool, bare, job("train", 2, duration="1h")])
    lab.advance(6 * 3600)
    assert len(lab.nodes()) == 1  # the bare pod is "not replicated": the node cannot be drained
    lab.delete("debug-shell")
    lab.advance(3600)
    assert len(lab.nodes()) == 0
    events = lab.autoscaler_events()
    assert events["message"].str.contains("debug-shell").any() or len(events) > 0


def run_day(config, pod_annotations=None):
    pool = scaling_pool(max_count=8)
    pool["spec"]["count"] = 4
    docs = [pool] + [at(job(f"j{i}", 2, duration="3h", pod_annotations=pod_annotations), f"{i * 30}m")
                     for i in range(8)]
    return gpu_lab.simulate(([config] if config else []) + docs, until="24h")


PACK = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{
            "name": "NodeResourcesFit", "args": {"scoringStrategy": {
                "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}}]}]}
NO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def test_scale_down_evicts_a_running_job_pod_and_the_job_starts_over():
    r = run_day(PACK)
    t = r.timeline
    evicted = t[t["reason"] == "Evicted"]
    assert len(evicted) == 2 and evicted["owner"].nunique() == 1  # a 2-GPU job on an 8-GPU node: 25 %
    job = r.jobs.set_index("name").loc[evicted["owner"].iloc[0]]
    assert job["failed"] == 2 and job["state"] == "Complete"
    assert job["finished_at"] - evicted["finished_at"].max() >= 3 * 3600  # its 3 h began again


def test_packing_costs_less_than_spreading_over_the_same_day():
    # 16 one-GPU jobs arrive two minutes apart on 4 idle 8-GPU nodes: spreading puts 4 on
    # each node, so no node ever empties; packing fills two and the other two go.
    def run(config):
        pool = scaling_pool(max_count=4)
        pool["spec"]["count"] = 4
        docs = [pool] + [at(job(f"j{i}", 1, duration="4h", pod_annotations=NO_EVICT), f"{i * 2}m")
                         for i in range(16)]
        return gpu_lab.simulate(([config] if config else []) + docs, until="24h")

    spread, packed = run(None), run(PACK)
    assert spread.timeline["node"].nunique() >= 3 and packed.timeline["node"].nunique() == 2
    assert packed.metrics["jobs_complete"] == spread.metrics["jobs_complete"] == 16
    assert packed.metrics["node_hours"] < spread.metrics["node_hours"] - 4  # a third node for ~4 h
    assert packed.metrics["cost_usd"] < spread.metrics["cost_usd"]


def test_bad_autoscaling_is_one_line():
    pool = scaling_pool()
    pool["spec"]["autoscaling"].update(minCount=3, maxCount=2, provisioningDelay="soon")
    with pytest.raises(gpu_lab.GpuLabError) as err:
        gpu_lab.connect("sim").apply([pool])
    text = str(err.value)
    assert text.startswith('NodePool "h100" is invalid: [') and "\n" not in text
    assert "spec.autoscaling.maxCount" in text and 'spec.autoscaling.provisioningDelay: Invalid value: "soon"' in text
    with pytest.raises(gpu_lab.GpuLabError, match="at most one"):
        auto = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler", "metadata": {"name": "ca"}, "spec": {}}
        gpu_lab.connect("sim").apply([auto, {**auto, "metadata": {"name": "ca2"}}])
