#!/usr/bin/python3
"""An OCI runtime for Docker in a sandbox that lacks CAP_SYS_RESOURCE (opt-in, never by default).

kind runs its nodes as ``--privileged`` containers, and Docker asks runc for every capability.
In a sandbox whose capability bounding set lacks ``CAP_SYS_RESOURCE`` that fails with
"unable to apply caps: operation not permitted". This runtime removes that one capability
from the container's ``config.json`` (``create``/``run``) and from ``exec``'s ``--process``
file, then hands over to the real runc unchanged. On a normal Docker host it is not
installed at all (``gpu-lab kind engine`` installs it only where a privileged container
fails); it never adds anything.

Registered in dockerd's ``daemon.json`` as ``runtimes.gpu-lab-runc`` (plus
``default-runtime``); the real runc is ``$GPU_LAB_REAL_RUNC`` or the first ``runc`` on PATH
that is not this file. Standard library only: dockerd runs it with a bare environment.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

DROP = "CAP_SYS_RESOURCE"
SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")


def drop_caps(process: dict) -> bool:
    """Remove ``DROP`` from an OCI process's capability sets; whether anything changed."""
    caps = process.get("capabilities") or {}
    changed = False
    for name in SETS:
        values = caps.get(name)
        if values and DROP in values:
            caps[name] = [c for c in values if c != DROP]
            changed = True
    return changed


def _edit(path: str, process_of) -> None:
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return  # not ours to judge: runc reports a missing or bad file itself
    if drop_caps(process_of(doc)):
        with open(path, "w") as f:
            json.dump(doc, f)


def _option(args: list[str], *names: str) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _command(args: list[str]) -> tuple[str | None, list[str]]:
    """runc's subcommand (after global options such as ``--root DIR``) and what follows it."""
    takes_value = {"--root", "--log", "--log-format", "--criu", "--rootless"}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            i += 2 if (a in takes_value) else 1
            continue
        return a, args[i + 1:]
    return None, []


def adjust(args: list[str]) -> None:
    """Edit the files the runc invocation ``args`` will read."""
    command, rest = _command(args)
    if command in ("create", "run"):
        bundle = _option(rest, "--bundle", "-b") or os.getcwd()
        _edit(os.path.join(bundle, "config.json"), lambda d: d.setdefault("process", {}))
    elif command == "exec":
        process = _option(rest, "--process", "-p")
        if process:
            _edit(process, lambda d: d)


def real_runc() -> str:
    env = os.environ.get("GPU_LAB_REAL_RUNC")
    if env:
        return env
    me = os.path.realpath(__file__)
    for d in (os.environ.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(":"):
        cand = shutil.which("runc", path=d)
        if cand and os.path.realpath(cand) != me:
            return cand
    for cand in ("/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"):
        if os.path.exists(cand):
            return cand
    sys.stderr.write("gpu-lab-runc: no runc found (set GPU_LAB_REAL_RUNC)\n")
    sys.exit(127)


def main() -> None:
    args = sys.argv[1:]
    adjust(args)
    runc = real_runc()
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main()
