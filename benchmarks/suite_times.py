"""Where a pytest run's time went: wall time per module and the slowest tests, from the JUnit
XML that pytest writes with ``--junitxml`` (setup, call and teardown of every test, so a
module fixture's start and stop count towards its module).

    .venv/bin/python benchmarks/suite_times.py RUN.xml [RUN2.xml ...] [--top 30] [--markdown]
                                              [--write-weights tests/durations.json]

The figures of `benchmarks/ci.md` come from this script. ``--write-weights`` records each
module's seconds for the test run's scheduler (tests/conftest.py hands the longest modules
out first, so no long module starts last); a stale file only makes the order worse.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def module_of(classname: str) -> str:
    """JUnit's dotted class name as a file: tests.backends.kind.test_kind.TestX ->
    tests/backends/kind/test_kind.py; nbval's lessons.00_start_here.ipynb -> lessons/00_start_here.ipynb."""
    if classname.endswith(".ipynb"):
        folder, _, name = classname.removesuffix(".ipynb").partition(".")
        return f"{folder}/{name}.ipynb"
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def read(path: Path) -> list[tuple[str, str, float, str]]:
    """(module, test, seconds, outcome) for every test case of the report."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = module_of(case.get("classname", ""))
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        rows.append((module, case.get("name", ""), float(case.get("time", 0) or 0), outcome))
    return rows


def table(rows, top: int, markdown: bool) -> str:
    per: dict[str, list[float]] = defaultdict(list)
    for module, _, secs, _ in rows:
        per[module].append(secs)
    total = sum(s for _, _, s, _ in rows)
    out = []
    if markdown:
        out += ["| module | tests | seconds | share |", "|---|---:|---:|---:|"]
        for module, secs in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            out.append(f"| `{module}` | {len(secs)} | {sum(secs):.0f} | {sum(secs) / total:.0%} |")
        out.append(f"| **all** | {len(rows)} | **{total:.0f}** | |")
    else:
        for module, secs in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            out.append(f"{sum(secs):8.1f} s  {len(secs):4d} tests  {module}")
        out.append(f"{total:8.1f} s  {len(rows):4d} tests  (all)")
    out.append("")
    out.append("slowest tests:")
    for module, name, secs, outcome in sorted(rows, key=lambda r: -r[2])[:top]:
        out.append(f"{secs:8.1f} s  {module}::{name}" + ("" if outcome == "passed" else f"  [{outcome}]"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xml", type=Path, nargs="+")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write-weights", type=Path, metavar="JSON")
    args = ap.parse_args(argv)
    rows = [r for path in args.xml for r in read(path)]
    print(table(rows, args.top, args.markdown))
    if args.write_weights:
        per: dict[str, float] = defaultdict(float)
        for module, _, secs, _ in rows:
            per[module] += secs
        args.write_weights.write_text(json.dumps(
            {m: round(s, 1) for m, s in sorted(per.items(), key=lambda kv: -kv[1])}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
