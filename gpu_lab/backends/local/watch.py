"""A watch that another thread can cancel at once.

``KubeClient.watch`` blocks in a socket read until the server sends something or the
watch times out, and nothing can interrupt it. An open watch also keeps
kube-apiserver from shutting down gracefully (``gpu-lab down`` then waits for its
SIGKILL timeout). ``CancellableWatch`` issues the same request through
``KubeClient.request`` and keeps the response, so ``cancel()`` can shut the socket
down: the reading thread's iteration ends right away and the server sees the
connection close.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import requests

from .client import KubeClient, Unreachable, WatchEvent, watch_events


def _socket_of(resp: requests.Response) -> socket.socket | None:
    raw = getattr(resp, "raw", None)
    for conn in (getattr(raw, "connection", None), getattr(raw, "_connection", None)):
        sock = getattr(conn, "sock", None)
        if sock is not None:
            return sock
    with contextlib.suppress(AttributeError):  # urllib3 1.x: through http.client
        return raw._fp.fp.raw._sock
    return None


class CancellableWatch:
    """``for ev in CancellableWatch(client).stream("Pod", ...)``; ``cancel()`` from any thread."""

    def __init__(self, client: KubeClient):
        self.client = client
        self._resp: requests.Response | None = None
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
        timeout_seconds: int = 60,
        allow_bookmarks: bool = True,
    ) -> Iterator[WatchEvent]:
        """Events until the server ends the watch or ``cancel()``; an ``ERROR`` event
        (410 Gone...) raises :class:`ApiError`."""
        if self.cancelled:
            return
        c = self.client
        r = c.resource(kind)
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "fieldSelector": field_selector,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
        }
        resp = c.request(
            "GET", r.path(None), params=params, stream=True,
            timeout=(c.timeout, timeout_seconds + c.timeout),
        )  # fmt: skip
        with self._lock:
            self._resp = resp
        if self.cancelled:  # cancel() ran before the response was kept
            self.cancel()
        try:
            yield from watch_events(resp)
        except (
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ConnectionError,
        ) as exc:
            if self.cancelled or "Read timed out" in str(exc):
                return
            if isinstance(exc, requests.exceptions.ChunkedEncodingError):
                return  # the server closed the stream (it went away)
            raise Unreachable(f"watch of {r.plural} at {c.server} broke: {exc}") from exc
        except (OSError, ValueError, AttributeError):
            if self.cancelled:
                return
            raise
        finally:
            with self._lock:
                self._resp = None
            resp.close()
