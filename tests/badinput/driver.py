"""Run bad scenarios through the CLI and the Python API in one process, under a memory cap.

``python driver.py LIMIT_BYTES SECONDS FILE...`` prints one JSON object per file: the
CLI's exit code and stderr, the API's outcome (``ok`` or the exception's type and text),
and the peak RSS. The test (test_corpus.py) compares them with each case's expectation.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import signal
import sys


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _peak_rss_mb() -> int:
    """This process's own peak RSS. Not ru_maxrss: Linux carries the parent's peak across
    fork and exec into it, so under a large pytest it would report pytest's size."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main(argv: list[str]) -> None:
    limit, seconds, files = int(argv[0]), int(argv[1]), argv[2:]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    import gpu_lab
    from gpu_lab import cli

    for path in files:
        out: dict = {"file": path}
        err = io.StringIO()
        signal.alarm(seconds)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                out["rc"] = cli.main(["run", path])
        except _Timeout:
            out["rc"] = "timeout"
        except BaseException as e:  # noqa: BLE001 - a traceback is what the corpus catches
            out["rc"] = f"{type(e).__name__}: {e}"[:500]
        signal.alarm(0)
        out["stderr"] = err.getvalue()
        signal.alarm(seconds)
        try:
            lab = gpu_lab.connect("sim")
            lab.apply(path)
            lab.schedule()
            out["api"] = "ok"
        except gpu_lab.GpuLabError as e:
            out["api"] = f"GpuLabError: {e}"
        except _Timeout:
            out["api"] = "timeout"
        except BaseException as e:  # noqa: BLE001
            out["api"] = f"{type(e).__name__}: {e}"[:500]
        signal.alarm(0)
        out["maxrss_mb"] = _peak_rss_mb()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
