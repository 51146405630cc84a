"""Credentials in files: client-go reads certificates and keys from disk, so PEM data
from a kubeconfig or an exec plugin lands in private temp files that go when the
process exits."""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile

_TEMP: list[str] = []


@atexit.register
def _cleanup() -> None:
    for p in _TEMP:
        with contextlib.suppress(OSError):
            os.unlink(p)


def materialise(data: bytes, suffix: str) -> str:
    """``data`` (PEM) in a 0600 temp file, removed when the process exits."""
    fd, path = tempfile.mkstemp(prefix="gpu-lab-kubeconfig-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    _TEMP.append(path)
    return path
