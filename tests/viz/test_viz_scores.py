from vizkit import dataset_with, pod, pool, session, walk

import gpu_lab

charts = gpu_lab.charts


def _lab():
    return session(pool("h100", "H100-80GB", 8, count=3), pod("first", 6), pod("second", 2))


def test_stacked_weighted_scores_sum_to_the_explanation_totals():
    lab = _lab()
    e = lab.explain("default/second")
    chart = charts.scores(e)
    rows = dataset_with(chart, "node", "plugin", "weighted")
    plugins = [p for p in dict.fromkeys(c[0] for c in e.scores.columns) if p != "total"]
    assert {r["plugin"] for r in rows} == set(plugins)
    assert {r["node"] for r in rows} == set(e.scores.index)
    for node in e.scores.index:
        mine = [r for r in rows if r["node"] == node]
        assert sum(r["weighted"] for r in mine) == e.scores.loc[node, ("total", "")]
        for r in mine:
            assert r["weighted"] == e.scores.loc[node, (r["plugin"], "weighted")]
    totals = dataset_with(chart, "node", "total", "label")
    assert {t["node"]: t["total"] for t in totals} == {
        n: int(v) for n, v in e.scores[("total", "")].items()}
    chosen = [t for t in totals if t["chosen"]]
    assert [t["node"] for t in chosen] == [e.node]
    assert "chosen" in chosen[0]["label"]
    # best first, as in the explanation
    y = next(enc["y"] for enc in walk(chart.to_dict()) if isinstance(enc.get("y"), dict)
             and enc["y"].get("field") == "node")
    assert y["sort"] == list(e.scores.index)


def test_pending_pod_gets_a_text_chart():
    lab = session(pool("l4", "L4", 4), pod("huge", 8))
    e = lab.explain("default/huge")
    assert e.node is None and e.scores.empty
    chart = charts.scores(e, title="why pending")
    spec = chart.to_dict()
    assert spec["mark"]["type"] == "text"
    lines = [r["line"] for r in dataset_with(chart, "line")]
    assert lines[0] == "No node was scored."
    assert "Insufficient nvidia.com/gpu" in " ".join(lines)
    assert spec["title"]["text"] == "why pending"


def test_single_feasible_node_is_bound_without_scores():
    lab = session(pool("l4", "L4", 2), pod("p", 2))
    e = lab.explain("default/p")
    assert e.node == "l4-0"
    lines = [r["line"] for r in dataset_with(charts.scores(e), "line")]
    assert lines[:2] == ["No node was scored.", "The pod was bound to l4-0 without scoring."]
    assert any("only one feasible node" in line for line in lines)


def test_the_real_schedulers_scores_chart_without_raw_values():
    """On local, explain carries kube-scheduler's logged weighted scores (no raw column)."""
    import pandas as pd

    from gpu_lab.backends.local import schedulerlog
    from gpu_lab.sim.explain import Explanation

    attempt = schedulerlog.Attempt("default/p", scores={
        "n0": {"TaintToleration": 300, "NodeResourcesFit": 35},
        "n1": {"TaintToleration": 300, "NodeResourcesFit": 17}}, totals={"n0": 335, "n1": 317}, node="n0")
    account = Explanation("default/p", "n0", "", "default-scheduler", pd.DataFrame(), pd.DataFrame(), [])
    e = schedulerlog.explained(account, attempt, {"TaintToleration": 3, "NodeResourcesFit": 1}, ["n0", "n1"])
    rows = dataset_with(charts.scores(e), "node", "plugin", "weighted")
    assert {(r["node"], r["plugin"], r["weighted"], r["raw"]) for r in rows} == {
        ("n0", "TaintToleration", 300, None), ("n0", "NodeResourcesFit", 35, None),
        ("n1", "TaintToleration", 300, None), ("n1", "NodeResourcesFit", 17, None)}
    assert "Score (normalized / weighted):" in str(e)


def _title_lines(chart) -> list[str]:
    title = chart.to_dict()["title"]
    sub = title.get("subtitle", []) if isinstance(title, dict) else []
    return [sub] if isinstance(sub, str) else list(sub)


def test_a_tie_and_the_plugins_that_had_no_say_are_named():
    # two empty identical nodes: every plugin scores both alike, the totals tie
    lab = session(pool("h100", "H100-80GB", 8, count=2), pod("only", 2))
    e = lab.explain("default/only")
    totals = e.scores[("total", "")]
    assert totals.nunique() == 1 and len(totals) == 2
    assert e.tie() == [e.node, next(n for n in totals.index if n != e.node)]
    plugins = [p for p in dict.fromkeys(c[0] for c in e.scores.columns) if p != "total"]
    assert e.uniform_plugins() == plugins
    text = e.summary()
    assert f"tie between {e.tie()[0]} and {e.tie()[1]} at {int(totals.iloc[0])}" in text
    assert "random pick" in text and "no say in the choice" in text
    lines = _title_lines(charts.scores(e))
    assert any(line.startswith("tie at the top between") for line in lines)
    assert any(line.startswith("grey: the same on every node") for line in lines)
    grey = [r for r in dataset_with(charts.scores(e), "plugin", "uniform") if r["uniform"]]
    assert {r["plugin"] for r in grey} == set(plugins)


def test_no_tie_when_the_chosen_node_scored_highest():
    # "first" holds cpu and memory on one of two nodes: the empty one scores strictly higher
    lab = session(pool("h100", "H100-80GB", 8, count=2), pod("first", 6), pod("second", 2))
    e = lab.explain("default/second")
    totals = e.scores[("total", "")]
    if totals.nunique() == 1:  # the scenario must make the totals differ for this test to mean anything
        raise AssertionError(f"totals tie: {totals.to_dict()}")
    assert e.tie() == []
    assert "tie between" not in e.summary()
    varying = [p for p in dict.fromkeys(c[0] for c in e.scores.columns)
               if p != "total" and e.scores[(p, "weighted")].nunique() > 1]
    assert varying and not set(varying) & set(e.uniform_plugins())
