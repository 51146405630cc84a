import pytest

import gpu_lab

charts = gpu_lab.charts


def test_png_and_svg_offline(tmp_path):
    chart = charts.mig_profiles("H100-80GB")
    png = charts.save(chart, tmp_path / "profiles.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = charts.save(chart, str(tmp_path / "profiles.SVG"))
    text = svg.read_text()
    assert text.lstrip().startswith("<svg") and "1g.10gb" in text


def test_other_suffix_is_refused(tmp_path):
    with pytest.raises(gpu_lab.GpuLabError, match=r"\.png or \.svg"):
        charts.save(charts.contention(), tmp_path / "chart.pdf")
    assert not (tmp_path / "chart.pdf").exists()


def test_every_chart_renders_to_svg():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 2, gpu: {model: H100-80GB, count: 8}, cpu: "64", memory: 512Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: a}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 3}}}]}
""")
    lab.schedule()
    from gpu_lab.viz.export import to_svg

    for chart in (charts.occupancy(lab), charts.scores(lab.explain("default/a")),
                  charts.fragmentation({"x": lab}), charts.cost(charts.fleet_cost({"x": lab})),
                  charts.contention(), charts.mig_layout(gpu_lab.gpus.validate_mig_layout(
                      "H100-80GB", {"1g.10gb": 7}))):
        assert "<svg" in to_svg(chart)


def test_charts_render_offline_as_inline_svg():
    import altair as alt

    import gpu_lab

    chart = gpu_lab.charts.contention(max_sharers=3)
    assert alt.renderers.active == "gpu-lab"
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert set(bundle) == {"image/svg+xml", "text/plain"}  # no HTML that loads vega from a CDN
    assert bundle["image/svg+xml"].lstrip().startswith("<svg")
    assert "cdn.jsdelivr" not in bundle["image/svg+xml"]
