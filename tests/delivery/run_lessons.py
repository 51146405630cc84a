"""Execute notebooks with nbclient and report each kernel's peak memory (stand-alone script).

Run by the Binder test with the *fresh* environment's Python, so it imports nothing from the
test suite:  python run_lessons.py [--save DIR] OUT.json NOTEBOOK...

``--save DIR`` also writes each executed notebook (without the probe cell) to DIR, so the
static edition can be rendered from this one execution (``edition.build(executed=DIR)``).

Each notebook runs in its own kernel, with its folder as the working directory (as JupyterLab
and nbval run it). After the last cell, one extra cell (not saved) asks the kernel for its
peak resident set size (``VmHWM`` in ``/proc/self/status``, KiB): what the lesson
cost the kernel process at its worst. Writes ``{name: {"peak_mib", "seconds", "gpu_lab",
"error"}}`` to OUT.json; exits 1 when any notebook failed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from gpu_lab.edition import kernel_config

# VmHWM, the kernel's own peak: ru_maxrss would also count the parent's size at fork.
PROBE = (
    "import json as _j, gpu_lab as _g\n"
    "_kib = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
    "print('GPU_LAB_PEAK ' + _j.dumps({'kib': _kib, 'gpu_lab': _g.__file__}))"
)


def run(path: Path, timeout: int = 600, save: Path | None = None) -> dict:
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    started = time.monotonic()
    result: dict = {"peak_mib": None, "seconds": None, "gpu_lab": None, "error": None}
    try:
        # no widget state kept, as the static edition executes (its widgets render statically)
        NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                       config=kernel_config(), resources={"metadata": {"path": str(path.parent)}}).execute()
    except Exception as exc:  # a failing cell: report it, carry on with the next notebook
        result["error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    result["seconds"] = round(time.monotonic() - started, 1)
    for out in nb.cells[-1].get("outputs", []):
        text = out.get("text", "")
        if "GPU_LAB_PEAK " in text:
            doc = json.loads(text.split("GPU_LAB_PEAK ", 1)[1])
            result["peak_mib"] = round(doc["kib"] / 1024, 1)
            result["gpu_lab"] = doc["gpu_lab"]
    if save is not None and result["error"] is None:
        nb.cells.pop()  # the probe
        save.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, save / path.name)
    return result


def main(argv: list[str]) -> int:
    save = None
    if argv[:1] == ["--save"]:
        save, argv = Path(argv[1]), argv[2:]
    out, notebooks = Path(argv[0]), [Path(p) for p in argv[1:]]
    report = {}
    for nb in notebooks:
        report[nb.name] = run(nb, save=save)
        print(nb.name, json.dumps(report[nb.name]), flush=True)
        out.write_text(json.dumps(report, indent=2))
    return 1 if any(r["error"] for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
