"""``gpu-lab bench``: the whole path a user waits for, and the growth check that fails a
quadratic step (a ratio within one run, never a timed test)."""

from __future__ import annotations

from gpu_lab import bench


def _fake_runs(monkeypatch, seconds_at):
    """run_bench replaced by figures that are ``seconds_at(step, pods)``."""
    def fake(nodes, pods, seed=0, repeat=3):
        steps = {f"{k}_seconds": seconds_at(k, pods) for k in bench.STEPS}
        return {"nodes": nodes, "pods": pods, **steps, "total_seconds": sum(steps.values()), "peak_rss_mb": 1.0}
    monkeypatch.setattr(bench, "run_bench", fake)
    monkeypatch.setattr(bench, "reference_seconds", lambda: 0.03)


def test_linear_steps_pass(monkeypatch):
    _fake_runs(monkeypatch, lambda step, pods: pods * 1e-4)
    r = bench.run_scaling((1000, 2000), (1000, 20000))
    assert r["pods_factor"] == 10 and r["limit"] == 15 and r["too_fast_growing"] == []
    assert r["growth"] == {"read": 10.0, "apply": 10.0, "schedule": 10.0, "table": 10.0, "total": 10.0}


def test_a_quadratic_step_fails_and_is_named(monkeypatch, capsys):
    # apply as it was: documents x pods
    _fake_runs(monkeypatch, lambda step, pods: (pods / 1000) ** 2 if step == "apply" else pods * 1e-4)
    r = bench.run_scaling((1000, 2000), (1000, 20000))
    assert r["growth"]["apply"] == 100.0 and r["too_fast_growing"] == ["apply", "total"]
    assert bench.main(0, 0, 0, False, scaling=((1000, 2000), (1000, 20000))) == 1
    out = capsys.readouterr().out
    assert "apply" in out and "100.0x  FAIL" in out and "a step fails above 15.0x (the total" in out


def test_the_bench_file_is_the_workload_as_yaml(tmp_path):
    from gpu_lab.model.documents import load_documents

    path = bench.write_scenario(tmp_path / "b.yaml", 10, 30, seed=1)
    assert load_documents(path) == bench.node_pools(10) + bench.workload(30, 1)


def test_a_step_too_small_to_matter_is_shown_but_not_judged(monkeypatch, capsys):
    # the table step: hundredths of a second, 40x by noise; the total grows 10x
    _fake_runs(monkeypatch, lambda step, pods: (0.001 if pods < 10000 else 0.04) if step == "table"
               else pods * 1e-4)
    r = bench.run_scaling((1000, 2000), (1000, 20000))
    assert r["growth"]["table"] == 40.0 and r["too_fast_growing"] == []


def test_the_trace_spreads_its_jobs_over_the_days_asked():
    from gpu_lab.benchtrace import trace
    from gpu_lab.model.duration import parse_duration

    def submits(docs):
        return [parse_duration(d["metadata"]["annotations"]["gpulab.dev/submit-at"]) for d in docs if d["kind"] == "Job"]

    assert trace(20, 50, days=1) == trace(20, 50)  # a day's trace is the one it always was
    week = submits(trace(20, 700, days=7))
    assert max(week) < 7 * 86400 and len({int(t // 86400) for t in week}) == 7
    assert max(submits(trace(20, 700))) < 86400


def test_days_below_one_is_one_clear_line(capsys):
    from gpu_lab.cli import main

    assert main(["bench", "--trace", "--days", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --days must be at least 1 (got 0)"
