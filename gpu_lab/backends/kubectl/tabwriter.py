"""Go's ``text/tabwriter``, as kubectl uses it: cells end at a tab, a column is as wide as its
widest cell in a block of consecutive lines that have it, plus the padding.

``kubectl get`` writes through ``tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)`` (minimum width 6,
padding 3) and ``kubectl describe`` through ``NewWriter(out, 0, 8, 2, ' ', 0)``; the last cell
of a line (the text after its last tab) is never padded. Widths count characters (runes).
"""

from __future__ import annotations

GET = (6, 3)  # kubectl get: minwidth, padding
DESCRIBE = (0, 2)  # kubectl describe


def tabulate(text: str, minwidth: int, padding: int) -> str:
    """``text`` (lines of tab-separated cells) laid out as one tabwriter flush lays it out."""
    lines = [line.split("\t") for line in text.split("\n")]
    out: list[str] = []
    _format(lines, 0, len(lines), [], minwidth, padding, out)
    return "\n".join(out)


def _format(lines: list[list[str]], line0: int, line1: int, widths: list[int], minwidth: int,
            padding: int, out: list[str]) -> None:
    """text/tabwriter's ``format``: the block of lines having column ``len(widths)`` gets
    that column's width, then the columns right of it, recursively."""
    column = len(widths)
    this = line0
    while this < line1:
        if column >= len(lines[this]) - 1:
            this += 1
            continue
        _write(lines, line0, this, widths, out)
        line0 = this
        width = minwidth
        while this < line1 and column < len(lines[this]) - 1:
            width = max(width, len(lines[this][column]) + padding)
            this += 1
        _format(lines, line0, this, [*widths, width], minwidth, padding, out)
        line0 = this
    _write(lines, line0, line1, widths, out)


def _write(lines: list[list[str]], line0: int, line1: int, widths: list[int], out: list[str]) -> None:
    for cells in lines[line0:line1]:
        out.append("".join(c.ljust(widths[j]) if j < len(widths) else c for j, c in enumerate(cells)))
