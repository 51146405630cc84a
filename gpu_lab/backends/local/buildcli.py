"""``gpu-lab controlplane build``: the command line of :mod:`.build` (and of
:mod:`.kueuebuild`, which builds on it), so that neither build module imports the other's
caller.

    python3 -m gpu_lab.backends.local.buildcli [--components kube-apiserver,etcd] [--force]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...errors import GpuLabError
from . import kueuebuild
from .build import ADDONS, ALL, DEFAULT_VERSION, JOBS, build, default_cache_dir


def _split_components(values: list[str] | None) -> list[str]:
    out = [p.strip() for v in values or [] for p in v.split(",") if p.strip()]
    return list(ALL) if not out or "all" in out else out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="gpu-lab controlplane build",
        description="Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager "
        "from pinned Go module sources into a per-user cache.",
    )
    p.add_argument(
        "--components",
        action="append",
        metavar="NAMES",
        help=f"comma-separated subset of {','.join(ALL)} (default: all)",
    )
    p.add_argument(
        "--version", default=DEFAULT_VERSION, help="Kubernetes release (default %(default)s)"
    )
    p.add_argument("--etcd-version", help="etcd release (default: what controlplane/etcd pins)")
    p.add_argument(
        "--cache-dir", type=Path, help=f"binary cache root (default {default_cache_dir()})"
    )
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--no-path", action="store_true", help="ignore matching binaries on PATH")
    p.add_argument("-p", "--jobs", type=int, default=JOBS, help="go build -p (default %(default)s)")
    p.add_argument("--with", dest="addons", action="append", choices=ADDONS, default=[],
                   help="also build an add-on: kueue (sigs.k8s.io/kueue's manager, see "
                   "controlplane/kueue)")
    args = p.parse_args(argv)
    try:
        paths = build(
            _split_components(args.components),
            args.version,
            args.cache_dir,
            etcd_version=args.etcd_version,
            force=args.force,
            use_path=not args.no_path,
            jobs=args.jobs,
            progress=lambda msg: print(msg, flush=True),
        )
        if "kueue" in args.addons:
            paths["kueue"] = kueuebuild.build(
                cache_dir=args.cache_dir, force=args.force, jobs=args.jobs,
                progress=lambda msg: print(msg, flush=True),
            ).binary
    except GpuLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    for c, path in paths.items():
        print(f"{c}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
