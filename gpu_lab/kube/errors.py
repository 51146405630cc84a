"""What goes wrong talking to an API server, as one line in Kubernetes' own words.

The API server's error answers become the exceptions of :mod:`gpu_lab.errors`.
:class:`ApiError` carries the API server's ``Status``: ``str()`` is its ``message``
(``pods "x" not found``), ``code`` and ``reason`` its HTTP status and ``Status.reason``.
:class:`Unreachable` is no answer at all (connection refused, TLS failure, timeout).
"""

from __future__ import annotations

import json

# the classes live with every other exception a user can meet; imported here for callers
from gpu_lab.errors import AlreadyExists, ApiError, Conflict, NotFound, Unreachable

__all__ = ["AlreadyExists", "ApiError", "Conflict", "NotFound", "Unreachable", "api_error",
           "status_error"]


def api_error(code: int, http_reason: str, body: bytes) -> ApiError:
    """The error for an HTTP error answer whose body is (usually) a ``Status``."""
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = status.get("reason") or http_reason or ""
    message = status.get("message") or body.decode(errors="replace").strip()[:300]
    cls = ApiError
    if code == 404:
        cls = NotFound
    elif code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    return cls(code, reason, message, status)


def status_error(status: dict) -> ApiError:
    """The error of a watch's ``ERROR`` event (410 Gone: the resourceVersion is too old)."""
    return ApiError(status.get("code", 500), status.get("reason", ""), status.get("message", ""),
                    status)
