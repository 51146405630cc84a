"""Small clusters and chart-reading helpers shared by the chart tests."""

from __future__ import annotations

import gpu_lab


def pool(name: str, model: str, gpus: int, count: int = 1, extra: str = "") -> str:
    return f"""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {{name: {name}}}
spec:
  count: {count}
  gpu: {{model: {model}, count: {gpus}}}
  cpu: "64"
  memory: 512Gi
{extra}
---
"""


def pod(name: str, gpus: int, resource: str = "nvidia.com/gpu", node: str | None = None) -> str:
    selector = f"\n  nodeName: {node}" if node else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:{selector}
  containers:
  - name: c
    image: x
    resources:
      requests: {{cpu: "1", memory: 1Gi}}
      limits: {{{resource}: {gpus}}}
---
"""


def session(*docs: str) -> gpu_lab.Session:
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply("".join(docs))
    lab.schedule()
    return lab


def datasets(chart) -> list[list[dict]]:
    """The inline datasets of a chart's Vega-Lite dict (altair puts them under "datasets")."""
    spec = chart.to_dict()
    return list(spec.get("datasets", {}).values())


def dataset_with(chart, *columns: str) -> list[dict]:
    """The (single) inline dataset whose rows have all ``columns``."""
    found = [d for d in datasets(chart) if d and all(c in d[0] for c in columns)]
    assert len(found) == 1, f"expected one dataset with {columns}, got {len(found)}"
    return found[0]


def walk(spec):
    """Every dict inside a Vega-Lite spec (to find marks and encodings)."""
    if isinstance(spec, dict):
        yield spec
        for v in spec.values():
            yield from walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from walk(v)


def subtitle(chart) -> list[str]:
    title = chart.to_dict()["title"]
    sub = title.get("subtitle", [])
    return [sub] if isinstance(sub, str) else list(sub)
