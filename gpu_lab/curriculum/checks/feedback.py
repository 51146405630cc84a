"""Specific feedback for a lab's check cell: one line per requirement, met or not.

A lab's check function builds a ``Checklist``, states each requirement with the
message a learner should read when it is not met (numbers and names, not "wrong"),
and ends with ``done()``: it returns the ``Feedback`` when everything passed and
raises ``LabCheckFailed`` (an ``AssertionError``, so notebook runners and pytest see
a failure) with the same text when something did not.

A failure names the symptom and the ``kubectl`` command that shows it (``look``), not the
answer; a failed check of a lab ends with the line pointing to ``gpu_lab.labs.hint(N)``,
which gives the lab's hints one at a time (``hints.py``), the answer last.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from ...errors import LabCheckFailed
from .hints import lab_of


@dataclass
class Feedback:
    title: str
    results: list[tuple[bool, str]] = field(default_factory=list)
    footer: str = ""

    @property
    def passed(self) -> bool:
        return all(ok for ok, _ in self.results)

    @property
    def failures(self) -> list[str]:
        return [text for ok, text in self.results if not ok]

    def __str__(self) -> str:
        head = f"{self.title}: {'passed' if self.passed else 'not yet'}"
        lines = [head] + [f"  {'✔' if ok else '✘'} {text}" for ok, text in self.results]
        if self.footer and not self.passed:
            lines.append(f"  {self.footer}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        items = "".join(
            f"<li style='color:{'#1a7f37' if ok else '#cf222e'}'>{'✔' if ok else '✘'} {html.escape(text)}</li>"
            for ok, text in self.results)
        return (f"<div><b style='color:{colour}'>{html.escape(self.title)}: "
                f"{'passed' if self.passed else 'not yet'}</b><ul style='list-style:none'>{items}</ul>"
                + (f"<i>{html.escape(self.footer)}</i>" if self.footer and not self.passed else "") + "</div>")


class Checklist:
    """Collect requirements for one check cell.

    >>> c = Checklist("Lab 00: demo")
    >>> c.require(2 + 2 == 4, "arithmetic is broken", "2 + 2 is 4")
    True
    >>> print(c.done())
    Lab 00: demo: passed
      ✔ 2 + 2 is 4
    """

    def __init__(self, title: str, *, look: str | None = None):
        self.feedback = Feedback(title)
        self.look = look
        lab = lab_of(title)
        if lab is not None:
            self.feedback.footer = f"Stuck? gpu_lab.labs.hint({int(lab)}) gives a hint, one more each call."

    def require(self, ok: bool, fail: str, passed: str | None = None, *, look: str | None = None) -> bool:
        """One requirement: ``fail`` is what the learner reads when it is not met.

        ``look`` (default: the checklist's) is the ``kubectl`` command that shows the
        symptom; it is added to ``fail`` unless ``fail`` already names a ``kubectl`` command.
        """
        ok = bool(ok)
        look = look or self.look
        if not ok and look and "kubectl" not in fail:
            fail = f"{fail} (`{look}` shows it)"
        self.feedback.results.append((ok, passed or fail if ok else fail))
        return ok

    def done(self) -> Feedback:
        """The feedback when every requirement is met; otherwise raise ``LabCheckFailed``."""
        if not self.feedback.results:
            raise LabCheckFailed(f"{self.feedback.title}: no requirement was checked")
        if not self.feedback.passed:
            raise LabCheckFailed(str(self.feedback))
        return self.feedback
