"""How long the whole curriculum takes on the sim: every lesson, solution and generated lab.

Each notebook runs in a fresh kernel from its own folder, as nbval and the labs tests do;
labs are expected to stop at their first stub (NotImplementedError) and are timed up to
there. Peak memory is the kernel's maximum resident set size. Usage:

    .venv/bin/python benchmarks/curriculum.py [--json benchmarks/results/curriculum.json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from gpu_lab.edition import kernel_config  # IPC kernels, as gpu-lab starts them everywhere

ROOT = Path(__file__).resolve().parents[1]
# The kernel's own peak (VmHWM); ru_maxrss would also count this process's size at fork.
PEAK_RSS = "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))"


def run(path: Path, expect_stub: bool) -> dict:
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_RSS))
    client = NotebookClient(nb, timeout=300, kernel_name="python3", config=kernel_config(),
                            resources={"metadata": {"path": str(path.parent)}},
                            allow_errors=expect_stub)
    t0 = time.perf_counter()
    try:
        client.execute()
        outcome = "ok"
    except CellExecutionError as err:
        outcome = f"error: {str(err).strip().splitlines()[-1][:200]}"
    seconds = time.perf_counter() - t0
    stopped = any(o.get("ename") == "NotImplementedError" for c in nb.cells if c.cell_type == "code"
                  for o in c.get("outputs", []) if o.get("output_type") == "error")
    if expect_stub:
        outcome = "stopped at a stub" if stopped else "did not stop at a stub"
    rss = next((o["text"].strip() for o in nb.cells[-1].get("outputs", []) if o.get("name") == "stdout"), "")
    return {"notebook": str(path.relative_to(ROOT)), "seconds": round(seconds, 2), "outcome": outcome,
            "peak_rss_mb": round(int(rss) / 1024, 1) if rss.isdigit() else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--with-local", action="store_true",
                    help="let lesson 05 run its real-scheduler cell where the control plane is built "
                         "(default: hidden, so the figures are the sim's, as on Binder)")
    args = ap.parse_args(argv)
    if not args.with_local:  # the kernels inherit it: no control-plane binaries are found
        os.environ["GPU_LAB_CACHE"] = tempfile.mkdtemp(prefix="gpu-lab-no-controlplane-")
    # A learner's first kernel writes gpu_lab's bytecode and every later one reads it; where
    # PYTHONDONTWRITEBYTECODE is set (as on CI machines) each kernel would compile the package
    # again, about 0.5 s per notebook that no learner waits for. Compile once, untimed.
    compileall.compile_dir(ROOT / "gpu_lab", quiet=1)
    books = [(p, False) for d in ("lessons", "solutions") for p in sorted((ROOT / d).glob("[0-9]*.ipynb"))]
    books += [(p, True) for p in sorted((ROOT / "labs").glob("[0-9]*.ipynb"))]
    rows, t0 = [], time.perf_counter()
    for path, stub in books:
        row = run(path, stub)
        rows.append(row)
        print(f"{row['notebook']:<45} {row['seconds']:>6.1f} s  {row['peak_rss_mb'] or '?':>6} MB  {row['outcome']}",
              flush=True)
    total = time.perf_counter() - t0
    print(f"{'total':<45} {total:>6.1f} s  ({len(rows)} notebooks, one after the other)")
    if args.json:
        args.json.write_text(json.dumps({"total_seconds": round(total, 1), "notebooks": rows,
                                         "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")},
                                        indent=2) + "\n")
    bad = [r for r in rows if r["outcome"] not in ("ok", "stopped at a stub")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
