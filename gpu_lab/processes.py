"""Start, recognise and stop long-lived component processes.

Components run in their own session (``start_new_session=True``), so they outlive the
Python process that started them (a notebook kernel restart keeps the cluster) and
each one leads a process group that :func:`stop` signals as a whole.

A pid alone proves nothing: the process may be gone or its pid reused. A pid counts
as one of ours only when ``/proc/<pid>/cmdline`` names the expected binary and carries
a marker string (the lab directory, which every component's flags mention), and, when
known, the kernel's start time of the process matches what was recorded at spawn.
A child of this Python process that has not exited is known without ``/proc``: the
kernel closes the exec error pipe (so ``Popen`` returns) before it sets the new argv,
and a check in that window would read an empty cmdline and start the component twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

#: children started by this Python process, kept so that they can be reaped (no zombies)
_CHILDREN: dict[int, subprocess.Popen] = {}
#: exit statuses of reaped children, for error messages
_EXIT_CODES: dict[int, int] = {}
#: argv and start time (read at spawn) of those children
_SPAWNED: dict[int, tuple[list[str], int | None]] = {}

LOG_ROTATE_BYTES = 20 * 1024 * 1024


def _proc(pid: int) -> Path:
    return Path("/proc") / str(pid)


def reap() -> None:
    """Collect exit statuses of children that ended, so they do not linger as zombies."""
    for pid, p in list(_CHILDREN.items()):
        code = p.poll()
        if code is not None:
            _EXIT_CODES[pid] = code
            del _CHILDREN[pid]
            _SPAWNED.pop(pid, None)


def cmdline(pid: int) -> list[str] | None:
    """argv of ``pid``, or ``None`` when there is no such (live, non-zombie) process."""
    if pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        try:
            raw = (_proc(pid) / "cmdline").read_bytes()
        except OSError:
            return None
        if not raw:  # zombies and kernel threads have an empty cmdline
            return None
        return raw.rstrip(b"\0").decode(errors="replace").split("\0")
    try:  # macOS and other Unixes: ps prints the command line joined by spaces
        out = subprocess.run(
            ["ps", "-p", str(pid), "-o", "state=,command="],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out or out.startswith("Z"):
        return None
    return out.split(None, 1)[1].split() if " " in out else None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, number of threads, start time in clock ticks since boot) of ``pid``."""
    try:
        stat = (_proc(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[17]), int(fields[19])
    except (IndexError, ValueError):
        return None


def run_state(pid: int | None) -> str | None:
    """The kernel's one-letter state of ``pid`` (``R``, ``S``, ``T`` stopped by a signal,
    ``t`` stopped by a tracer, ``Z``...), ``None`` when there is no such process."""
    if not pid:
        return None
    st = _stat(pid)
    return None if st is None else st[0]


def is_frozen(pid: int | None) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, Ctrl-Z): alive, but it answers nothing."""
    return run_state(pid) in ("T", "t")


def resume(pid: int | None) -> bool:
    """SIGCONT the process group of a stopped ``pid``; True if it was stopped."""
    if not pid or not is_frozen(pid):
        return False
    _signal(pid, signal.SIGCONT)
    return True


def start_time(pid: int) -> int | None:
    """The process' start time in clock ticks since boot (``/proc/<pid>/stat`` field 22);
    ``None`` once it has exited."""
    st = _stat(pid)
    if st is None or _exited(st):
        return None
    return st[2]


def _exited(st: tuple[str, int, int]) -> bool:
    # A killed multi-threaded process (every Go program) shows its leader as a zombie
    # while its other threads still tear down and hold its sockets: only a zombie with
    # no thread left has closed them.
    state, threads, _ = st
    return state in ("Z", "X") and threads <= 1


def is_ours(pid: int | None, binary_name: str, marker: str, started: int | None = None) -> bool:
    """Whether ``pid`` is a live ``binary_name`` process whose argv mentions ``marker``
    (and, when ``started`` is given, began at that start time)."""
    if not pid:
        return False
    reap()
    child = _SPAWNED.get(pid) if pid in _CHILDREN else None  # not reaped: still that process
    argv = child[0] if child is not None else cmdline(pid)
    if not argv or os.path.basename(argv[0]) != binary_name:
        return False
    if not any(marker in a for a in argv[1:]):
        return False
    if started is not None:
        now = child[1] if child is not None else start_time(pid)
        if now is not None and now != started:
            return False
    return True


def alive(pid: int | None, started: int | None = None) -> bool:
    """Whether ``pid`` exists and has not finished exiting (a zombie has: its sockets and
    files are closed); with ``started``, only if it is still that same process."""
    if not pid:
        return False
    reap()
    if not sys.platform.startswith("linux"):  # no /proc: ps (zombies excluded) is all we have
        return cmdline(pid) is not None
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def wait_gone(pid: int, started: int | None, timeout: float) -> bool:
    """Wait until ``pid`` (started at ``started``) has fully exited; True if it has."""
    deadline = time.monotonic() + timeout
    while alive(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def find(binary_name: str, marker: str) -> list[int]:
    """Every live process of ``binary_name`` whose argv mentions ``marker`` (Linux: /proc)."""
    reap()
    found = []
    if sys.platform.startswith("linux"):
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    else:
        try:
            out = subprocess.run(
                ["ps", "-axo", "pid="], capture_output=True, text=True, timeout=5
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        pids = [int(x) for x in out.split() if x.isdigit()]
    for pid in pids:
        if pid != os.getpid() and is_ours(pid, binary_name, marker):
            found.append(pid)
    return found


def _rotate(log: Path) -> None:
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))


def spawn(
    argv: list[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, int | None]:
    """Start ``argv`` detached (own session and process group), stdout and stderr appended
    to ``log``; return ``(pid, start_time)``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    _rotate(log)
    reap()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        os.write(fd, f"\n=== gpu-lab {stamp} start: {' '.join(argv)}\n".encode())
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    _CHILDREN[p.pid] = p
    _EXIT_CODES.pop(p.pid, None)
    started = start_time(p.pid)
    _SPAWNED[p.pid] = (list(argv), started)
    return p.pid, started


def exited(pid: int) -> int | None:
    """Exit status of a child of this process that has ended (``None`` if running or unknown)."""
    reap()
    return _EXIT_CODES.get(pid)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        try:
            group = os.getpgid(pid) == pid
        except ProcessLookupError:
            return
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
        if sig == signal.SIGTERM:  # a stopped (SIGSTOP) process acts on SIGTERM only once resumed
            if group:
                os.killpg(pid, signal.SIGCONT)
            else:
                os.kill(pid, signal.SIGCONT)


def stop(
    pids: Iterable[int],
    binary_names: Mapping[int, str],
    marker: str,
    timeout: float = 10.0,
    started: Mapping[int, int | None] | None = None,
) -> dict[int, str]:
    """SIGTERM each process group in ``pids`` that is still ours, wait up to ``timeout``,
    then SIGKILL what is left. Returns ``{pid: "terminated" | "killed" | "gone"}``."""
    started = started or {}

    def ours(pid: int) -> bool:
        return is_ours(pid, binary_names[pid], marker, started.get(pid))

    result: dict[int, str] = {}
    live: dict[int, int | None] = {}  # pid -> start time when signalled
    for pid in pids:
        if ours(pid):
            live[pid] = start_time(pid)
            _signal(pid, signal.SIGTERM)
        else:
            result[pid] = "gone"
    # "gone" means fully exited (zombie or reaped): only then are its ports closed
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        for pid in [p for p, st in live.items() if not alive(p, st)]:
            result[pid] = "terminated"
            del live[pid]
    for pid, st in live.items():
        if alive(pid, st):
            _signal(pid, signal.SIGKILL)  # the whole group, while its leader is still ours
        result[pid] = "killed"
    for pid, st in live.items():
        wait_gone(pid, st, 5.0)
    reap()
    return result


def peak_rss_kib(pid: int) -> int | None:
    """Peak resident set size of a live process (``VmHWM`` in KiB), Linux only."""
    try:
        for line in (_proc(pid) / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_kib(pid: int) -> int | None:
    """Current resident set size (``VmRSS`` in KiB), Linux only."""
    try:
        for line in (_proc(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
