"""The lessons' flow diagrams: self-contained, deterministic SVG that says what the lessons say."""

from __future__ import annotations

import base64
import itertools
import re
import xml.etree.ElementTree as ET

import pytest

import gpu_lab
from gpu_lab import edition
from gpu_lab.sim.plugins.registry import DEFAULT_MULTIPOINT, REGISTRY
from gpu_lab.viz import _svg, diagrams

charts = gpu_lab.charts
NS = "{http://www.w3.org/2000/svg}"
ALL = {"framework": charts.framework, "request_flow": charts.request_flow,
       "gang_admission": charts.gang_admission, "dra_objects": charts.dra_objects,
       "gpu_operator": charts.gpu_operator}
every_diagram = pytest.mark.parametrize("name", sorted(ALL))


def root(name: str) -> ET.Element:
    return ET.fromstring(ALL[name]().svg)


def texts(el: ET.Element) -> list[ET.Element]:
    return list(el.iter(f"{NS}text"))


def boxes(name: str, svg: ET.Element | None = None) -> dict[str, dict]:
    """key -> {x, y, w, h, text (every line, joined), lines (text elements)}."""
    found = {}
    for g in (root(name) if svg is None else svg).iter(f"{NS}g"):
        if g.get("class") != "box":
            continue
        rect = g.find(f"{NS}rect")
        assert rect is not None
        lines = texts(g)
        found[g.get("data-key")] = {
            "x": float(rect.get("x")), "y": float(rect.get("y")),
            "w": float(rect.get("width")), "h": float(rect.get("height")),
            "text": " ".join(t.text or "" for t in lines), "lines": lines}
    return found


def text_bbox(t: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a text element, from the builder's width estimate."""
    size = float(t.get("font-size"))
    width = _svg.text_width(t.text or "", size, bold=t.get("font-weight") == "bold")
    x, y = float(t.get("x")), float(t.get("y"))
    left = {"start": x, "middle": x - width / 2, "end": x - width}[t.get("text-anchor", "start")]
    return left, y - 0.8 * size, left + width, y + 0.25 * size


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


# ----------------------------------------------------------------- public names, Jupyter
def test_exported_from_gpu_lab_charts():
    for name in ALL:
        assert name in charts.__all__
        assert getattr(charts, name) is getattr(diagrams, name)


@every_diagram
def test_jupyter_shows_it_as_inline_svg(name):
    from IPython.core.formatters import DisplayFormatter

    d = ALL[name]()
    data, _ = DisplayFormatter().format(d)
    assert data["image/svg+xml"] == d.svg == d._repr_svg_()
    assert "text/html" not in data  # HTML would win over the SVG in JupyterLab and nbconvert
    assert name in data["text/plain"]


@every_diagram
def test_save_svg_and_png(name, tmp_path):
    d = ALL[name]()
    assert d.save(tmp_path / f"{name}.svg").read_text(encoding="utf-8") == d.svg
    assert d.save(str(tmp_path / f"{name}.PNG")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(gpu_lab.GpuLabError, match=r"\.svg or \.png"):
        d.save(tmp_path / f"{name}.pdf")
    assert charts.save(d, tmp_path / "via-charts.svg").read_text(encoding="utf-8") == d.svg


# ----------------------------------------------------------------- self-contained, readable
@every_diagram
def test_parses_and_is_deterministic(name):
    first, second = ALL[name]().svg, ALL[name]().svg
    assert first == second
    svg = ET.fromstring(first)
    assert svg.tag == f"{NS}svg" and svg.get("data-diagram") == name
    width, height = int(svg.get("width")), int(svg.get("height"))
    assert width <= 900 and svg.get("viewBox") == f"0 0 {width} {height}"
    assert svg.find(f"{NS}title").text and svg.find(f"{NS}desc").text


@every_diagram
def test_references_nothing_outside_itself(name):
    svg = ALL[name]().svg
    tree = ET.fromstring(svg)
    for el in tree.iter():
        assert el.tag.removeprefix(NS) not in {"script", "image", "style", "link", "foreignObject",
                                               "use", "a"}, el.tag
        for attr, value in el.attrib.items():
            assert "href" not in attr and not attr.startswith("on"), (el.tag, attr)
            assert "url(" not in value, (el.tag, attr, value)
    assert "@import" not in svg and "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert edition.remote_references(svg) == []


@every_diagram
def test_text_is_readable_and_stays_on_the_canvas(name):
    svg = root(name)
    width, height = int(svg.get("width")), int(svg.get("height"))
    for t in texts(svg):
        assert float(t.get("font-size")) >= 12, t.text
        left, top, right, bottom = text_bbox(t)
        assert left >= 0 and right <= width and top >= 0 and bottom <= height, t.text


@every_diagram
def test_text_fits_its_box(name):
    for key, b in boxes(name).items():
        for t in b["lines"]:
            left, top, right, bottom = text_bbox(t)
            assert b["x"] + _svg.PAD_X - 0.5 <= left and right <= b["x"] + b["w"] - _svg.PAD_X + 0.5, (
                f"{name}/{key}: {t.text!r} is wider than its box")
            assert b["y"] <= top and bottom <= b["y"] + b["h"], f"{name}/{key}: {t.text!r} leaves its box"


@every_diagram
def test_no_text_overlaps_text_or_a_box_it_is_not_in(name):
    svg = root(name)
    found = boxes(name, svg)
    inside = {id(t): key for key, b in found.items() for t in b["lines"]}
    every = [(t, text_bbox(t)) for t in texts(svg)]
    for (a, ba), (b, bb) in itertools.combinations(every, 2):
        assert not overlap(ba, bb), f"{name}: {a.text!r} overlaps {b.text!r}"
    for key, b in found.items():
        rect = (b["x"], b["y"], b["x"] + b["w"], b["y"] + b["h"])
        for t, bbox in every:
            if inside.get(id(t)) != key:
                assert not overlap(bbox, rect), f"{name}: {t.text!r} overlaps box {key}"


@every_diagram
def test_tones_differ_in_greyscale_and_text_reads_on_them(name):
    fills = sorted({r.get("fill") for r in root(name).iter(f"{NS}rect") if r.get("fill") != "none"})
    lum = {f: _svg.luminance(f) for f in fills}
    for a, b in itertools.combinations(fills, 2):
        assert abs(lum[a] - lum[b]) >= 0.07, (name, a, b)

    def linear(colour: str) -> float:  # WCAG relative luminance
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    for f in fills:
        contrast = (linear(f) + 0.05) / (linear(_svg.INK) + 0.05)
        assert contrast >= 4.5, (name, f, contrast)  # WCAG AA for the box text


def test_all_tones_are_far_apart_in_greyscale():
    for a, b in itertools.combinations(_svg.FILLS.values(), 2):
        assert abs(_svg.luminance(a) - _svg.luminance(b)) >= 0.07, (a, b)


# ----------------------------------------------------------------- what they say, in order
def in_order(name: str, keys: list[str], axis: str) -> dict[str, dict]:
    found = boxes(name)
    missing = [k for k in keys if k not in found]
    assert not missing, f"{name}: no boxes {missing}"
    coord = [found[k][axis] for k in keys]
    assert coord == sorted(coord) and len(set(coord)) == len(coord), (
        f"{name}: {keys} are not {'top to bottom' if axis == 'y' else 'left to right'}: {coord}")
    return found


def says(found: dict[str, dict], key: str, *phrases: str) -> None:
    text = found[key]["text"]
    for phrase in phrases:
        assert phrase in text, f"box {key} ({text!r}) does not say {phrase!r}"


FRAMEWORK_ORDER = ["PreEnqueue", "QueueSort", "PreFilter", "Filter", "PostFilter", "PreScore",
                   "Score", "NormalizeScore", "Reserve", "Permit", "PreBind", "Bind", "PostBind"]


def test_framework_extension_points_top_to_bottom_with_their_plugins():
    found = in_order("framework", FRAMEWORK_ORDER, "y")
    for point in FRAMEWORK_ORDER:
        assert found[point]["text"] == point
        assert found[f"plugins:{point}"]["y"] == found[point]["y"]  # the plugins beside it
    plugins = {p: found[f"plugins:{p}"]["text"] for p in FRAMEWORK_ORDER}
    for point in ("PreFilter", "Filter", "Score"):
        assert "NodeResourcesFit" in plugins[point]
    for point in ("Filter", "Score"):
        for name in ("TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity",
                     "DynamicResources"):
            assert name in plugins[point], (point, name)
    assert "DefaultPreemption" in plugins["PostFilter"]
    assert "GangScheduling" in plugins["Permit"] and "minCount" in plugins["Permit"]
    assert "GangScheduling" in plugins["PreEnqueue"]
    assert "DefaultBinder" in plugins["Bind"]
    assert "PrioritySort" in plugins["QueueSort"]
    bands = [t.text for t in texts(root("framework")) if t.get("class") == "band-label"]
    assert [b.split(":")[0] for b in bands] == ["Scheduling queue", "Scheduling cycle", "Binding cycle"]


def test_framework_agrees_with_the_simulated_default_profile():
    """What gpu_lab.sim models of v1.37's default profile is drawn: each plugin at the points
    its class implements, and its score weight."""
    drawn = {point: plugins for _, point, plugins, _ in diagrams.EXTENSION_POINTS}
    names = {re.sub(r" ×\d+$", "", p) for plugins in drawn.values() for p in plugins}
    phases = {"pre_enqueue": "PreEnqueue", "pre_filter": "PreFilter", "filter": "Filter",
              "post_filter": "PostFilter", "pre_score": "PreScore", "score": "Score",
              "normalize_score": "NormalizeScore", "permit": "Permit"}
    for name, cls in REGISTRY.items():
        if name not in names:
            continue  # NodeName, NodePorts: in the profile, left out of the picture
        for method, point in phases.items():
            if cls.implements(method):
                listed = {re.sub(r" ×\d+$", "", p) for p in drawn[point]}
                assert name in listed, f"{name} implements {point} in gpu_lab.sim but is not drawn there"
    weights = {p.split(" ×")[0]: int(p.split(" ×")[1]) for p in drawn["Score"]}
    default = {p["name"]: p.get("weight", 1) for p in DEFAULT_MULTIPOINT}
    assert weights == {n: default[n] for n in weights}


def test_request_flow_from_api_server_to_container():
    main = ["api", "scheduler", "kubelet", "allocate", "answer", "runtime", "container"]
    found = in_order("request_flow", main, "y")
    says(found, "api", "API server")
    says(found, "scheduler", "kube-scheduler", "nvidia.com/gpu", "integer")
    says(found, "kubelet", "kubelet", "device manager", "free, healthy device IDs",
         "GetPreferredAllocation")
    says(found, "allocate", "Allocate")
    says(found, "answer", "NVIDIA_VISIBLE_DEVICES", "mounts", "device specs", "CDI")
    says(found, "runtime", "container runtime", "NVIDIA Container Toolkit")
    says(found, "container", "container")
    assert len({found[k]["x"] for k in main}) == 1  # one column
    registration = in_order("request_flow", ["register", "listandwatch", "allocatable"], "y")
    says(registration, "register", "Register", "kubelet.sock")
    says(registration, "listandwatch", "ListAndWatch", "Healthy")
    says(registration, "allocatable", "allocatable nvidia.com/gpu")
    assert min(registration[k]["x"] for k in ("register", "listandwatch", "allocatable")) > max(
        found[k]["x"] + found[k]["w"] for k in main)  # beside the request, right of it


def test_gang_admission_from_suspended_job_to_gang():
    order = ["job", "workload", "localqueue", "clusterqueue", "admitted", "unsuspended", "pods",
             "kube-scheduler", "bound"]
    found = in_order("gang_admission", order, "y")
    says(found, "job", "suspend: true", "kueue.x-k8s.io/queue-name")
    says(found, "workload", "Workload")
    says(found, "localqueue", "LocalQueue")
    says(found, "clusterqueue", "ClusterQueue", "quota", "nominalQuota")
    says(found, "admitted", "Admitted")
    says(found, "unsuspended", "unsuspended")
    says(found, "pods", "Pods")
    says(found, "kube-scheduler", "kube-scheduler", "GangScheduling", "Permit", "minCount")
    says(found, "bound", "or none")
    says(found, "cohort", "Cohort", "borrow")
    says(found, "podgroup", "PodGroup", "minCount")
    cq = found["clusterqueue"]
    assert found["cohort"]["x"] > cq["x"] + cq["w"]  # borrowing sits beside the quota check
    assert found["cohort"]["y"] < cq["y"] + cq["h"] and cq["y"] < found["cohort"]["y"] + found["cohort"]["h"]


def test_dra_objects_and_the_path_to_cdi():
    found = in_order("dra_objects", ["deviceclass", "claimtemplate", "claim", "pod"], "x")
    in_order("dra_objects", ["claim", "resourceslice", "prepare"], "y")
    in_order("dra_objects", ["deviceclass", "dynamicresources", "prepare"], "y")
    in_order("dra_objects", ["prepare", "driver-prepare", "cdi", "container"], "x")
    says(found, "deviceclass", "DeviceClass")
    says(found, "claimtemplate", "ResourceClaimTemplate", "CEL")
    says(found, "claim", "ResourceClaim", "allocation")
    says(found, "pod", "Pod", "resourceClaims")
    says(found, "resourceslice", "ResourceSlice", "per node")
    says(found, "driver", "DRA driver")
    says(found, "dynamicresources", "DynamicResources")
    says(found, "prepare", "kubelet", "NodePrepareResources")
    says(found, "driver-prepare", "DRA driver")
    says(found, "cdi", "CDI")
    assert len({found[k]["y"] for k in ("deviceclass", "claimtemplate", "claim", "pod")}) == 1


# ----------------------------------------------------------------- the static edition keeps it
def test_the_edition_embeds_the_svg_and_loads_nothing():
    """A notebook whose outputs are the four diagrams, rendered by the exporter and clean-up
    ``gpu-lab edition`` uses: each SVG arrives intact as a data-URI image."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbconvert")
    from IPython.core.formatters import DisplayFormatter

    formatter = DisplayFormatter()
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Diagrams"))
    for name, fn in ALL.items():
        data, _ = formatter.format(fn())
        nb.cells.append(nbformat.v4.new_code_cell(
            f"gpu_lab.charts.{name}()", execution_count=1,
            outputs=[nbformat.v4.new_output("execute_result", data=data, execution_count=1)]))
    edition.static_widgets(nb)
    body, _ = edition._exporter().from_notebook_node(nb, resources={"metadata": {"name": "d"}})
    body = edition._fix_links(edition._strip_remote(body), {})
    assert edition.remote_references(body) == []
    embedded = [base64.b64decode(m).decode("utf-8")
                for m in re.findall(r'<img\b[^>]*\bsrc="data:image/svg\+xml;base64,([^"]+)"', body)]
    assert embedded == [fn().svg for fn in ALL.values()]
