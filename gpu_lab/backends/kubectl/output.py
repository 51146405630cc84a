"""What ``Session.kubectl`` returns: kubectl's text, shown as kubectl shows it.

``print()`` it or let a notebook cell end with it: IPython prints the text as is, and
JupyterLab's HTML view puts it in ``<pre>``, so columns stay aligned.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class KubectlOutput:
    command: str  # what was asked, e.g. "get pods -o wide"
    text: str  # stdout then stderr, as a terminal shows them
    returncode: int = 0  # kubectl's exit status (1 with "Error from server (NotFound): ...")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.text)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.text)}</pre>"

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()
