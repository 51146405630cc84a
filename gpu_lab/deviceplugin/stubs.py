"""gRPC stubs for the device-plugin API, generated from ``api/v1beta1.proto`` on first use.

No generated code is committed. ``load()`` runs ``grpc_tools.protoc`` once per
distinct proto/toolchain and keeps the result in a cache folder:

    $GPU_LAB_CACHE/stubs/<key>/                 when GPU_LAB_CACHE is set
    $XDG_CACHE_HOME/gpu-lab/stubs/<key>/        else, when XDG_CACHE_HOME is set
    ~/.cache/gpu-lab/stubs/<key>/               otherwise

``<key>`` hashes the proto text together with the grpcio-tools and protobuf
versions (generated modules check the protobuf runtime they run on), so an
edited proto or an upgraded toolchain regenerates. Generation writes into a
fresh temporary folder next to the final one and renames it into place, so
concurrent threads or processes never see a half-written folder: whoever loses
the rename race just uses the winner's copy. ``python -m gpu_lab.deviceplugin.stubs``
generates ahead of time (a build step, a Docker layer) and prints the folder.

The modules are imported as ``v1beta1_pb2`` and ``v1beta1_pb2_grpc`` (the names
protoc's Python output refers to each other by) without touching ``sys.path``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

from ..errors import GpuLabError

PROTO = Path(__file__).parent / "api" / "v1beta1.proto"
PB2, PB2_GRPC = "v1beta1_pb2", "v1beta1_pb2_grpc"

_lock = threading.Lock()
_loaded: tuple[ModuleType, ModuleType] | None = None


def cache_root() -> Path:
    """The gpu-lab cache folder (``$GPU_LAB_CACHE`` or the XDG default)."""
    if os.environ.get("GPU_LAB_CACHE"):
        return Path(os.environ["GPU_LAB_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "gpu-lab"


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "none"


def stub_key() -> str:
    """What the generated stubs depend on: proto text, grpcio-tools and protobuf versions."""
    h = hashlib.sha256(PROTO.read_bytes())
    h.update(f"\0grpcio-tools={_version('grpcio-tools')}\0protobuf={_version('protobuf')}".encode())
    return h.hexdigest()[:16]


def stub_dir() -> Path:
    return cache_root() / "stubs" / stub_key()


def generate(dest: Path | None = None) -> Path:
    """Make sure the stubs exist in ``dest`` (default ``stub_dir()``); return the folder."""
    dest = Path(dest) if dest is not None else stub_dir()
    if (dest / f"{PB2_GRPC}.py").is_file():
        return dest
    try:
        from grpc_tools import protoc
    except ImportError:
        raise GpuLabError("the device-plugin stubs need grpcio-tools: pip install grpcio-tools") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        shutil.copyfile(PROTO, tmp / PROTO.name)
        include = Path(protoc.__file__).parent / "_proto"  # well-known types
        rc = protoc.main(["grpc_tools.protoc", f"-I{tmp}", f"-I{include}",
                          f"--python_out={tmp}", f"--grpc_python_out={tmp}", str(tmp / PROTO.name)])
        if rc != 0 or not (tmp / f"{PB2_GRPC}.py").is_file():
            raise GpuLabError(f"protoc failed on {PROTO} (exit {rc})")
        try:
            os.rename(tmp, dest)  # atomic; fails if another writer got there first
        except OSError:
            if not (dest / f"{PB2_GRPC}.py").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _import(name: str, path: Path) -> ModuleType:
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py path always gets a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # v1beta1_pb2_grpc does "import v1beta1_pb2"
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load() -> tuple[ModuleType, ModuleType]:
    """``(v1beta1_pb2, v1beta1_pb2_grpc)``, generating them first if needed."""
    global _loaded
    with _lock:
        if _loaded is None:
            where = generate()
            pb2 = _import(PB2, where / f"{PB2}.py")
            _loaded = (pb2, _import(PB2_GRPC, where / f"{PB2_GRPC}.py"))
        return _loaded


if __name__ == "__main__":
    print(generate())
