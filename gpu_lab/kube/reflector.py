"""List, then watch from the list's resourceVersion, as client-go's reflector does: the list
is handed over whole (so whoever keeps state knows what it lacks is gone), each event after
it one by one; a 410 Gone, a broken stream or an unreachable server lists again."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .errors import ApiError, Unreachable
from .watch import CancellableWatch

log = logging.getLogger("gpu_lab.kube")

#: the server ends each watch after this long and the loop opens the next from where it was
WATCH_TIMEOUT_S = 60
RETRY_S = 1.0  # after an error other than 410 Gone


def list_and_watch(
    watcher: CancellableWatch,
    kind: str,
    *,
    on_list: Callable[[list[dict]], object],
    on_event: Callable[[str, dict], object],
    running: Callable[[], bool],
    pause: Callable[[float], object],
    field_selector: str | None = None,
    resource_version: str | None = None,
) -> None:
    """Follow ``kind`` until ``running()`` is false or the watch is cancelled. With a
    ``resource_version`` (the caller listed already) the first list is skipped. ``pause``
    waits between retries (an event's ``wait``, so a stop ends it at once)."""
    client, rv = watcher.client, resource_version
    what = f"{kind.lower()} watch"
    while running():
        try:
            if rv is None:
                lst = client.list(kind, field_selector=field_selector)
                rv = lst["metadata"]["resourceVersion"]
                on_list(lst.get("items") or [])
            for ev in watcher.stream(kind, resource_version=rv, field_selector=field_selector,
                                     timeout_seconds=WATCH_TIMEOUT_S):
                if not running():
                    return
                rv = (ev.object.get("metadata") or {}).get("resourceVersion") or rv
                if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                    on_event(ev.type, ev.object)
        except ApiError as err:
            if err.code != 410:  # 410: the version is too old; list again at once
                log.warning("%s: %s", what, err)
                pause(RETRY_S)
            rv = None
        except Exception as err:  # noqa: BLE001 - the watch must go on
            if not running():
                return
            if isinstance(err, Unreachable):
                log.warning("%s: %s", what, err)
            else:
                log.exception(what)
            pause(RETRY_S)
            rv = None
