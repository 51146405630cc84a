"""``gpu-lab kind build|engine``: the images and the Docker engine of the kind backend.

    gpu-lab kind build [--force]        build every image (see ``build``); progress on stdout
    gpu-lab kind build --no-go          only the steps that need no Go binary (while it compiles)
    gpu-lab kind engine                 what the kind backend needs, and what is missing
    gpu-lab kind engine --daemon-json /etc/docker/daemon.json
                                        register the sandbox runtime where this machine needs it
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .cluster import default_repo


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu-lab kind", description="The kind backend's images and engine.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the node image and the device plugin's image here")
    b.add_argument("--force", action="store_true", help="rebuild every step")
    b.add_argument("--no-go", action="store_true",
                   help="only the steps that need no Go binary: pause, root filesystem, plugin image")
    b.add_argument("--repo", type=Path, default=None, help="gpu-lab source tree (default: this one)")
    e = sub.add_parser("engine", help="check the Docker engine; register the sandbox runtime")
    e.add_argument("--daemon-json", type=Path, metavar="PATH",
                   help="write the sandbox runtime into this daemon.json where it is needed")
    e.add_argument("--force", action="store_true", help="register the runtime even where not needed")
    args = p.parse_args(argv)
    if args.command == "build":
        from . import build

        build.build(args.repo or default_repo(), progress=lambda m: print(m, flush=True), force=args.force,
                    go=not args.no_go)
        return 0
    from . import build as kb
    from . import engine

    if args.daemon_json:
        print(engine.write_daemon_json(args.daemon_json, kb.cache_root() / "kind", force=args.force))
        return 0
    rows = engine.engine_report()
    for what, ok, detail in rows:
        print(f"{'ok ' if ok else 'NO '} {what:<16} {detail}")
    return 0 if all(ok for _, ok, _ in rows) else 1
