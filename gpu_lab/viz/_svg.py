"""A tiny SVG builder for the lessons' flow diagrams (``gpu_lab.viz.diagrams``).

Boxes with a bold title and wrapped body lines, straight arrows with labels, free notes.
The output is one self-contained ``<svg>``: no fonts, images, stylesheets or scripts are
referenced, every colour is inline and arrowheads are plain polygons (no ``<marker>`` ids
that could clash when a page inlines several diagrams). The same calls give the same bytes.

Text cannot be measured without a font renderer, so widths are estimated per character
(``text_width``) on the wide side (Verdana's metrics, wider than DejaVu Sans or Arial): a
box sized from the estimate holds its text in any sans-serif the reader's browser picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from ..errors import GpuLabError

FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
TITLE_SIZE = 14  # box titles, bold
BODY_SIZE = 13  # box bodies
SMALL_SIZE = 12  # arrow labels and notes: the smallest text drawn
HEADING_SIZE = 17
LINE_GAP = 4  # between lines of a box
PAD_X = 10
PAD_Y = 8
MAX_WIDTH = 900
INK = "#1a1a1a"
EDGE = "#4d4d4d"

#: box fills; the tones' greyscale lightness differs pairwise by >= 0.07
#: (tests/viz/test_viz_diagrams.py), so they stay apart printed in black and white, and
#: dark text reads on every one. Each diagram says which tone stands for what.
FILLS = {
    "white": "#ffffff",
    "blue": "#dde9f7",
    "grey": "#cccccc",
    "orange": "#f5a443",
    "green": "#6aab60",
    "violet": "#9678c8",
}

_NARROW = set("fijlrtI1.,:;'|!()[]{}/\\-` ")
_WIDE = set("mwMW@%")


def char_width(ch: str, size: float, bold: bool = False) -> float:
    if ch in _NARROW:
        w = 0.40
    elif ch in _WIDE:
        w = 0.95
    elif ch.isupper():
        w = 0.74
    else:
        w = 0.64
    return w * size * (1.08 if bold else 1.0)


def text_width(text: str, size: float, bold: bool = False) -> float:
    """An upper estimate of ``text``'s width in px at ``size`` px."""
    return sum(char_width(ch, size, bold) for ch in text)


def wrap(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    """``text`` split at spaces into lines no wider than ``width`` (a long word stays whole)."""
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and text_width(candidate, size, bold) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def luminance(colour: str) -> float:
    """The greyscale lightness of ``#rrggbb`` (Rec. 709 weights, 0 black .. 1 white)."""
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@dataclass(frozen=True)
class Box:
    key: str
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def right(self) -> float:
        return self.x + self.w

    def edge_towards(self, px: float, py: float) -> tuple[float, float]:
        """Where the line from the centre towards (px, py) leaves the box."""
        dx, dy = px - self.cx, py - self.cy
        if dx == 0 and dy == 0:
            return self.cx, self.cy
        sx = (self.w / 2) / abs(dx) if dx else float("inf")
        sy = (self.h / 2) / abs(dy) if dy else float("inf")
        s = min(sx, sy)
        return self.cx + dx * s, self.cy + dy * s


def _num(v: float) -> str:
    """Coordinates with at most one decimal, so the text is the same on every platform."""
    r = round(v, 1)
    return str(int(r)) if r == int(r) else f"{r:.1f}"


@dataclass
class Canvas:
    """Collects elements; ``diagram()`` lays them into one SVG of ``width`` px."""

    name: str
    width: int
    title: str
    description: str
    parts: list[str] = field(default_factory=list)
    boxes: dict[str, Box] = field(default_factory=dict)
    bottom: float = 0.0

    def __post_init__(self) -> None:
        if self.width > MAX_WIDTH:
            raise GpuLabError(f"diagram {self.name}: {self.width}px is wider than {MAX_WIDTH}px")
        self.text(16, 26, self.title, HEADING_SIZE, bold=True)
        self.bottom = 34

    # ---------------------------------------------------------------- text
    def text(self, x: float, y: float, s: str, size: float = SMALL_SIZE, *, bold: bool = False,
             anchor: str = "start", italic: bool = False, cls: str = "label") -> None:
        attrs = [f'x="{_num(x)}"', f'y="{_num(y)}"', f'font-size="{_num(size)}"']
        if bold:
            attrs.append('font-weight="bold"')
        if italic:
            attrs.append('font-style="italic"')
        if anchor != "start":
            attrs.append(f'text-anchor="{anchor}"')
        self.parts.append(f'<text class="{cls}" {" ".join(attrs)}>{escape(s)}</text>')
        self.bottom = max(self.bottom, y + 6)

    def note(self, x: float, y: float, s: str, width: float, size: float = SMALL_SIZE,
             italic: bool = True) -> float:
        """Wrapped free text starting at baseline ``y``; returns the y below it."""
        for line in wrap(s, width, size):
            self.text(x, y, line, size, italic=italic, cls="note")
            y += size + LINE_GAP
        return y

    # ---------------------------------------------------------------- boxes
    def box(self, key: str, x: float, y: float, w: float, title: str, body: str = "",
            role: str = "blue", *, note: str = "", h: float | None = None,
            dashed: bool = False) -> Box:
        """A rounded box: ``title`` in bold, ``body`` wrapped to the box's width below it,
        then ``note`` in italics; every line centred."""
        if key in self.boxes:
            raise GpuLabError(f"diagram {self.name}: two boxes named {key!r}")
        inner = w - 2 * PAD_X
        titles = wrap(title, inner, TITLE_SIZE, bold=True)
        bodies = [line for part in body.split("\n") if part for line in wrap(part, inner, BODY_SIZE)]
        notes = wrap(note, inner, SMALL_SIZE) if note else []
        need = (2 * PAD_Y + len(titles) * (TITLE_SIZE + LINE_GAP)
                + len(bodies) * (BODY_SIZE + LINE_GAP) + len(notes) * (SMALL_SIZE + LINE_GAP)
                - LINE_GAP)
        height = max(h or 0, need)
        fill = FILLS[role]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        label = " ".join(titles)
        self.parts.append(f'<g class="box" data-key={quoteattr(key)} data-label={quoteattr(label)}>')
        self.parts.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(height)}" '
                          f'rx="6" fill="{fill}" stroke="{EDGE}" stroke-width="1.5"{dash}/>')
        # centre the text block vertically when the box is taller than its text
        ty = y + (height - need) / 2 + PAD_Y
        for line in titles:
            ty += TITLE_SIZE
            self.text(x + w / 2, ty - 2, line, TITLE_SIZE, bold=True, anchor="middle", cls="title")
            ty += LINE_GAP
        for line in bodies:
            ty += BODY_SIZE
            self.text(x + w / 2, ty - 2, line, BODY_SIZE, anchor="middle", cls="body")
            ty += LINE_GAP
        for line in notes:
            ty += SMALL_SIZE
            self.text(x + w / 2, ty - 2, line, SMALL_SIZE, anchor="middle", italic=True, cls="body")
            ty += LINE_GAP
        self.parts.append("</g>")
        box = Box(key, x, y, w, height)
        self.boxes[key] = box
        self.bottom = max(self.bottom, box.bottom)
        return box

    def band(self, x: float, y: float, w: float, h: float, label: str,
             label_x: float | None = None) -> None:
        """A dashed frame grouping boxes, its label at its top (at ``label_x``, else the
        left), drawn behind them."""
        self.parts.insert(0, f'<rect class="band" x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" '
                             f'height="{_num(h)}" rx="8" fill="none" stroke="#8c8c8c" '
                             'stroke-width="1" stroke-dasharray="3 3"/>')
        self.text(x + 8 if label_x is None else label_x, y + 16, label, SMALL_SIZE, bold=True,
                  cls="band-label")

    # ---------------------------------------------------------------- arrows
    def arrow(self, a: Box | tuple[float, float], b: Box | tuple[float, float], label: str = "",
              *, dashed: bool = False, label_at: tuple[float, float] | None = None,
              anchor: str = "middle") -> None:
        """A straight arrow from ``a`` to ``b`` (boxes: clipped at their edges)."""
        bx, by = (b.cx, b.cy) if isinstance(b, Box) else b
        ax, ay = (a.cx, a.cy) if isinstance(a, Box) else a
        x1, y1 = a.edge_towards(bx, by) if isinstance(a, Box) else (ax, ay)
        x2, y2 = b.edge_towards(ax, ay) if isinstance(b, Box) else (bx, by)
        length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5 or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        head, half = 9.0, 4.5
        sx, sy = x2 - ux * head, y2 - uy * head  # the shaft stops where the head starts
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        self.parts.append(f'<g class="arrow"><line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(sx)}" '
                          f'y2="{_num(sy)}" stroke="{EDGE}" stroke-width="1.6"{dash}/>')
        points = [(x2, y2), (sx - uy * half, sy + ux * half), (sx + uy * half, sy - ux * half)]
        pts = " ".join(f"{_num(px)},{_num(py)}" for px, py in points)
        self.parts.append(f'<polygon points="{pts}" fill="{EDGE}"/></g>')
        if label:
            lx, ly = label_at or ((x1 + x2) / 2 + 6, (y1 + y2) / 2 + 4)
            self.text(lx, ly, label, SMALL_SIZE, anchor=anchor, cls="arrow-label")

    # ---------------------------------------------------------------- output
    def diagram(self) -> Diagram:
        height = int(self.bottom + 14)
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{height}" '
                f'viewBox="0 0 {self.width} {height}" role="img" aria-label={quoteattr(self.title)} '
                f'font-family={quoteattr(FONT)} fill="{INK}" data-diagram={quoteattr(self.name)}>')
        body = "\n".join([
            head,
            f"<title>{escape(self.title)}</title>",
            f"<desc>{escape(self.description)}</desc>",
            f'<rect class="background" x="0" y="0" width="{self.width}" height="{height}" fill="#ffffff"/>',
            *self.parts,
            "</svg>",
        ])
        return Diagram(self.name, body + "\n", self.width, height)


@dataclass(frozen=True)
class Diagram:
    """A finished diagram: Jupyter shows it inline (``_repr_svg_``), offline, no JavaScript."""

    name: str
    svg: str
    width: int
    height: int

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<diagram {self.name}: {self.width}x{self.height} SVG>"

    def save(self, path: str | Path) -> Path:
        """Write the diagram to ``path`` as SVG, or as PNG (rendered offline by vl-convert)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            path.write_text(self.svg, encoding="utf-8")
        elif suffix == ".png":
            import vl_convert as vlc  # the charts' renderer, loaded only to write a PNG

            path.write_bytes(vlc.svg_to_png(self.svg, scale=2.0))
        else:
            raise GpuLabError(f'cannot save a diagram as "{path.name}": use a .svg or .png file name')
        return path
