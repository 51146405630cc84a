"""Progressive hints: ``gpu_lab.labs.hint(N)`` shows lab N's next hint, one more per call.

Each lab's checks module holds its hints as ``HINTS``, a tuple of at least three strings,
vaguest first: the first points at what to look at (a ``kubectl`` command), the middle
ones at the mechanism, and only the last one gives the answer. How many hints a lab has
shown is kept per lab in this process, so a kernel restart starts again at the first
hint, and asking for lab 08's hints does not move lab 04's on.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from importlib import import_module

from ...errors import GpuLabError

LABS = ("01", "02", "03", "04", "05", "06", "07", "08", "09", "11", "13")
_shown: dict[str, int] = {}


@dataclass(frozen=True)
class Hint:
    """One hint: lab ``lab``'s hint ``number`` of ``total``; the last one is the answer."""

    lab: str
    number: int
    total: int
    text: str
    repeated: bool = False

    @property
    def is_answer(self) -> bool:
        return self.number == self.total

    @property
    def heading(self) -> str:
        kind = "the answer" if self.is_answer else "more with another call"
        again = ", shown again: there are no more" if self.repeated else ""
        return f"Lab {self.lab}, hint {self.number} of {self.total} ({kind}{again})"

    def __str__(self) -> str:
        return f"{self.heading}:\n  {self.text}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<div><b>{html.escape(self.heading)}</b><p>{html.escape(self.text)}</p></div>"


def _key(lab: int | str) -> str:
    match = re.fullmatch(r"(?:lab)?0*(\d{1,2})", str(lab).strip().lower())
    key = f"{int(match.group(1)):02d}" if match else ""
    if key not in LABS:
        raise GpuLabError(f"no lab {lab!r}: the labs with hints are {', '.join(str(int(n)) for n in LABS)}")
    return key


def hints_of(lab: int | str) -> tuple[str, ...]:
    """Every hint of lab ``lab``, in order (its checks module's ``HINTS``)."""
    key = _key(lab)
    found = tuple(getattr(import_module(f".lab{key}", __package__), "HINTS", ()))
    if len(found) < 3:
        raise GpuLabError(f"lab {key} has {len(found)} hints; every lab needs at least 3")
    return found


def hint(lab: int | str) -> Hint:
    """Lab ``lab``'s next hint: the first on the first call, the answer at the last one.

    Calls after the last show the answer again. ``reset_hints`` starts over.
    """
    key = _key(lab)
    found = hints_of(key)
    shown = _shown.get(key, 0)
    number = min(shown + 1, len(found))
    _shown[key] = number
    return Hint(key, number, len(found), found[number - 1], repeated=shown >= len(found))


def reset_hints(lab: int | str | None = None) -> None:
    """Start lab ``lab``'s hints (every lab's when ``None``) at the first one again."""
    if lab is None:
        _shown.clear()
    else:
        _shown.pop(_key(lab), None)


def lab_of(title: str) -> str | None:
    """The lab number in a check's title ("Lab 04: ..." -> "04"), None when there is none."""
    match = re.match(r"Lab (\d\d)\b", title)
    return match.group(1) if match and match.group(1) in LABS else None
