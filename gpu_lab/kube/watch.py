"""One watch, which another thread can cancel at once.

A watch is a streaming GET (``?watch=true``) whose body is one JSON event per line; the
lines are split by the ``kubernetes`` package's own ``iter_resp_lines``. Iterating blocks
in a socket read until the server sends something or the watch times out, and an open
watch also keeps kube-apiserver from shutting down gracefully (``gpu-lab down`` would wait
for its SIGKILL timeout). So :class:`CancellableWatch` keeps the response, and
``cancel()`` shuts its socket down (as ``kubernetes.watch.Watch.stop`` does): the reading
thread's iteration ends right away and the server sees the connection close.
``KubeClient.watch`` is this watch, for callers that never cancel.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import urllib3
from kubernetes.watch.watch import iter_resp_lines

from .errors import Unreachable, status_error

if TYPE_CHECKING:
    from .client import KubeClient


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict


def watch_event(line: str | bytes) -> WatchEvent:
    """One line of a watch stream; an ``ERROR`` event (410 Gone...) raises :class:`ApiError`."""
    ev = json.loads(line)
    if ev.get("type") == "ERROR":
        raise status_error(ev.get("object") or {})
    return WatchEvent(ev.get("type", ""), ev.get("object") or {})


def _socket_of(resp: urllib3.BaseHTTPResponse) -> socket.socket | None:
    conn = getattr(resp, "connection", None)
    return getattr(conn, "sock", None)


class CancellableWatch:
    """``for ev in CancellableWatch(client).stream("Pod", ...)``; ``cancel()`` from any thread."""

    def __init__(self, client: KubeClient):
        self.client = client
        self._resp: urllib3.BaseHTTPResponse | None = None
        self._lock = threading.Lock()
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        with self._lock:
            resp = self._resp
        if resp is None:
            return
        sock = _socket_of(resp)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            resp.close()

    def stream(
        self,
        kind: str,
        resource_version: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = 60,
        allow_bookmarks: bool = True,
        namespace: str | None = None,
        label_selector: str | None = None,
        api_version: str | None = None,
    ) -> Iterator[WatchEvent]:
        """Events until the server ends the watch (after ``timeout_seconds``) or ``cancel()``;
        all namespaces when ``namespace`` is None. An ``ERROR`` event (410 Gone...) raises
        :class:`ApiError`."""
        if self.cancelled:
            return
        c = self.client
        r = c.resource(kind, api_version)
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
        }
        read_timeout = None if timeout_seconds is None else timeout_seconds + c.timeout
        resp = c.request("GET", r.path(namespace), params=params, stream=True,
                         timeout=(c.timeout, read_timeout))  # fmt: skip
        with self._lock:
            self._resp = resp
        if self.cancelled:  # cancel() ran before the response was kept
            self.cancel()
        try:
            for line in iter_resp_lines(resp):
                if line.strip():
                    yield watch_event(line)
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError):
            return  # the server closed the stream (it went away) or went quiet past the timeout
        except urllib3.exceptions.HTTPError as exc:
            if self.cancelled:
                return
            raise Unreachable(f"watch of {r.plural} at {c.server} broke: {exc}") from exc
        except (OSError, ValueError, AttributeError):
            if self.cancelled:
                return
            raise
        finally:
            with self._lock:
                self._resp = None
            with contextlib.suppress(Exception):
                resp.close()
                resp.release_conn()
