"""The sim's Events: what ``kubectl get events`` shows, in the real components' words.

One entry per Event object, as the API server would keep it. client-go's event
correlator (tools/record/events_cache.go) turns an event identical to an earlier one
(same object, type, reason, message) into a ``count`` increment on the same Event,
so the sim counts the same way: a pod the scheduler fails 3 times with one message
has one ``FailedScheduling`` with count 3; a new message starts a new Event. (The
real aggregator also rewords after 10 distinct messages for one object in 10
minutes, which is timing; the sim never does.)
"""

from __future__ import annotations

from dataclasses import dataclass

#: the default binder's event (pkg/scheduler/schedule_one.go, bindingCycle)
SCHEDULED = "Successfully assigned {}/{} to {}"
#: the preemption executor's event on each victim (framework/preemption/executor.go); ``by`` is
#: "pod <uid>" or "podgroup <uid>" (the preemptor's EntityKeyType and UID)
PREEMPTED = "Preempted by {} on node {}"
#: an Event's note is at most 1024 bytes (validation.NoteLengthLimit)
NOTE_LENGTH_LIMIT = 1024


def truncate(message: str) -> str:
    """The scheduler's truncateMessage (schedule_one.go) for a FailedScheduling note."""
    raw = message.encode()
    if len(raw) <= NOTE_LENGTH_LIMIT:
        return message
    return raw[:NOTE_LENGTH_LIMIT - 4].decode(errors="ignore") + " ..."


@dataclass
class Event:
    namespace: str
    kind: str
    name: str
    type: str  # Normal or Warning
    reason: str
    message: str
    time: float  # when it was first seen, on the simulated clock
    count: int = 1
    last: float | None = None  # when it was last seen, once it repeats (kubectl's LAST SEEN)


class EventLog:
    """The Events recorded so far, oldest first."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, Event] = {}

    def record(self, namespace: str, kind: str, name: str, type_: str, reason: str, message: str,
               time: float) -> None:
        key = (namespace, kind, name, type_, reason, message)
        event = self._by_key.get(key)
        if event is not None:
            event.count += 1
            event.last = time
        else:
            self._by_key[key] = Event(namespace, kind, name, type_, reason, message, time)

    def __iter__(self):
        return iter(self._by_key.values())  # insertion order: the order they were first seen
