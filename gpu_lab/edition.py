"""``gpu-lab edition --out DIR``: the lessons as a static reading edition, browsable offline.

Every lesson is executed top to bottom on the embedded scheduler (``sim``) and rendered to
HTML with nbconvert, next to an ``index.html`` that links them in order:

- Charts are images already: ``gpu_lab.charts`` renders through vl-convert to inline SVG,
  so no JavaScript and no CDN is needed to see them.
- Widgets fall back to their static rendering: the execution keeps no widget state
  (``store_widget_state=False``) and the live-widget view is dropped from each output, so
  nbconvert writes the HTML every gpu-lab widget also carries (the drill's cards, the
  what-if's side-by-side charts) instead of a script from unpkg.
- MathJax and require.js (which nbconvert would load from a CDN) are left out; markdown
  images are embedded as data URIs.
- Links between lessons point at the ``.html`` pages; a link to a repository file outside
  the edition (a lab, a scenario) becomes plain text naming that file, so nothing dangles.

The control plane is hidden during execution (an empty ``GPU_LAB_CACHE``), so an edition
built on a machine with ``gpu-lab controlplane build`` done shows the same sim outputs as
one built anywhere else.

    gpu-lab edition --out site/ [--lessons 00_start_here 02_mig] [--timeout 600]
"""

from __future__ import annotations

import argparse
import contextlib
import html
import os
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .errors import EditionError, GpuLabError

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_REMOTE = r"""(?:https?:)?//[^"'\s)]+"""
#: a resource a page would fetch from the network (plain hyperlinks are citations, not fetches)
_REMOTE_ATTR = re.compile(
    r"""<(?:script|img|iframe|source|embed|audio|video|link)\b[^>]*?\b(?:src|href)\s*=\s*["']?"""
    + f"({_REMOTE})", re.I)
_REMOTE_CSS = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?""" + f"({_REMOTE})", re.I)
_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script>", re.I | re.S)
_URL = re.compile(r"https?://[^\s\"'`)]+")


def remote_references(page: str) -> list[str]:
    """Every URL ``page`` would load from the network: script/img/link/iframe sources, CSS
    imports, and URLs inside inline scripts (``import("https://...")``)."""
    found = _REMOTE_ATTR.findall(page) + _REMOTE_CSS.findall(page)
    for body in _SCRIPT.findall(page):
        found += _URL.findall(body)
    return found


@dataclass
class Page:
    source: Path
    html_name: str
    title: str
    seconds: float | None  # executing it here, None when it came executed (``build(executed=)``)


def lessons_dir() -> Path:
    """The checkout's ``lessons/`` (``$GPU_LAB_LESSONS`` overrides)."""
    env = os.environ.get("GPU_LAB_LESSONS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "lessons"


def find_lessons(root: Path, names: list[str] | None = None) -> list[Path]:
    every = sorted(root.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        stem = Path(name).stem
        match = [p for p in every if p.stem == stem or p.stem.split("_", 1)[0] == stem]
        if not match:
            known = ", ".join(p.stem for p in every)
            raise EditionError(f'no lesson "{name}" in {root} (lessons: {known})')
        chosen += [p for p in match if p not in chosen]
    return chosen


def _title(nb, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                return m.group(1).strip()
    return fallback


@contextlib.contextmanager
def _sim_only():
    """Hide the control-plane binaries while lessons run (their sim path, as on Binder)."""
    old = os.environ.get("GPU_LAB_CACHE")
    with tempfile.TemporaryDirectory(prefix="gpu-lab-edition-") as empty:
        os.environ["GPU_LAB_CACHE"] = empty
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("GPU_LAB_CACHE", None)
            else:
                os.environ["GPU_LAB_CACHE"] = old


def kernel_config():
    """Configuration for one kernel gpu-lab starts: it talks over local IPC sockets, not TCP,
    so nothing listens on a port and ipykernel has no reason to warn "running over TCP
    without encryption" at every start. Call it once per kernel."""
    from traitlets.config import Config  # Jupyter's: loaded only to run lessons

    config = Config()
    config.KernelManager.transport = "ipc"
    # A socket path of its own per kernel (the default, "kernel-ipc" in the working directory,
    # is shared by every kernel started there), and a short one: a Unix socket's path may
    # not pass 107 bytes, which a runtime directory under a test's tmp folder does.
    # jupyter_client removes the files at shutdown; the key still guards the kernel.
    config.KernelManager.ip = str(Path(tempfile.gettempdir()) / f"gpu-lab-{uuid.uuid4().hex[:12]}")
    return config


def execute(path: Path, timeout: int = 600):
    """The lesson, executed in a fresh kernel with its folder as working directory."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            store_widget_state=False, config=kernel_config(),
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        with _sim_only():
            client.execute()
    except CellExecutionError as exc:
        last = str(exc).strip().splitlines()[-1:] or ["?"]
        raise EditionError(f"{path.name} failed to execute: {last[0]}") from None
    return nb


def static_widgets(nb) -> int:
    """Drop live-widget views from outputs (their static HTML/PNG stays); returns how many."""
    dropped = 0
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and WIDGET_MIME in data:
                del data[WIDGET_MIME]
                dropped += 1
                if not data:
                    data["text/plain"] = "(an interactive widget: open the notebook to use it)"
    return dropped


def _exporter():
    from nbconvert import HTMLExporter

    # embed_images stays off: with it nbconvert re-parses each raw HTML block on its own with
    # BeautifulSoup, which closes a lone <details> at once, so every Under the hood section
    # rendered empty with its text after it. Code-cell images are data URIs either way and
    # markdown attachments are embedded regardless; the delivery tests fail on any image
    # that is not embedded.
    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""  # no CDN script; lessons write no LaTeX
    exporter.require_js_url = ""
    return exporter


def _strip_remote(body: str) -> str:
    """Remove the scripts nbconvert's template would load from a CDN: MathJax/require.js
    ``<script src>`` tags and the module that imports mermaid from cdnjs when a page has a
    mermaid diagram (lessons have none; a diagram would show as its source text)."""
    body = re.sub(r"<script\b[^>]*\bsrc\s*=\s*[\"'](?:https?:)?//[^\"']*[\"'][^>]*>\s*</script>",
                  "", body, flags=re.I)
    body = _SCRIPT.sub(lambda m: "" if _URL.search(m.group(1)) else m.group(0), body)
    return re.sub(r"<script\s+src=\"\"\s*>\s*</script>\n?", "", body)  # emptied CDN URLs


def _fix_links(body: str, pages: dict[str, str]) -> str:
    """``X.ipynb`` links to lessons in the edition (and ``GLOSSARY.md`` to its page) ->
    ``X.html``; other relative links to notebooks or files of the repository -> plain text
    naming the file."""

    def repl(m: re.Match) -> str:
        href, rest, text = m.group(2), m.group(3), m.group(4)
        path, _, anchor = href.partition("#")
        name = Path(path).name
        if (path.endswith(".ipynb") or path.endswith(".md")) and name in pages:
            target = pages[name] + (f"#{anchor}" if anchor else "")
            return f'<a{m.group(1) or " "}href="{target}"{rest}>{text}</a>'
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", href, re.I):
            return m.group(0)  # absolute URLs, mailto:, in-page anchors stay
        where = html.escape(path.replace("../", ""))
        return f'<span class="gpu-lab-repo-file" title="{where} in the gpu-lab repository">' \
               f"{text} (<code>{where}</code> in the repository)</span>"

    return re.sub(r"<a(\s[^>]*?)?\s*href=\"([^\"]*)\"([^>]*)>(.*?)</a>",
                  repl, body, flags=re.S | re.I)


GLOSSARY = "GLOSSARY.md"
GLOSSARY_PAGE = "glossary.html"


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading (lower case, punctuation dropped, spaces to -): the
    lessons link glossary entries by it, so the edition's page keeps it."""
    text = re.sub(r"<[^>]+>", "", html.unescape(heading)).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def render_glossary(path: Path, exporter, pages: dict[str, str]) -> str:
    """``GLOSSARY.md`` as a page of the edition, styled like the lessons, every heading with
    the anchor the lessons link to."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(path.read_text(encoding="utf-8"))])
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": "glossary"}})

    def anchor(m: re.Match) -> str:
        slug = github_slug(re.sub(r'<a class="anchor-link".*?</a>', "", m.group(3), flags=re.S))
        inner = re.sub(r'(class="anchor-link" href=")#[^"]*"', rf'\1#{slug}"', m.group(3))
        return f'<h{m.group(1)} id="{slug}"{m.group(2)}>{inner}</h{m.group(1)}>'

    body = re.sub(r'<h([1-6]) id="[^"]*"([^>]*)>(.*?)</h\1>', anchor, body, flags=re.S)
    return _fix_links(_strip_remote(body), pages)


_INDEX_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:760px;margin:3em auto;
padding:0 1em;line-height:1.5;color:#1f2328}
h1{margin-bottom:.2em} ol{padding-left:1.4em} li{margin:.5em 0} .meta{color:#59636e;font-size:.9em}
a{color:#0969da}
"""


def render_index(pages: list[Page], version: str, glossary: bool = False) -> str:
    items = "\n".join(
        f'  <li><a href="{p.html_name}">{html.escape(p.title)}</a> '
        f'<span class="meta">({html.escape(p.source.name)}'
        + (f", executed in {p.seconds:.0f}s" if p.seconds is not None else "") + ")</span></li>"
        for p in pages)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpu-lab: the lessons (reading edition)</title>
<style>{_INDEX_CSS}</style></head>
<body>
<h1>gpu-lab: the lessons</h1>
<p class="meta">A static reading edition: every lesson executed on the embedded scheduler
(<code>sim</code>) by gpu-lab {html.escape(version)} on {time.strftime("%Y-%m-%d")}.
Charts are images and widgets are shown in their static form; to run the cells and use
the widgets, open the notebooks in JupyterLab (<code>make lab</code>).</p>
<ol>
{items}
</ol>
{f'<p>The terms of art, one or two sentences each: <a href="{GLOSSARY_PAGE}">the glossary</a>.</p>' if glossary else ""}
</body></html>
"""


def build(out: Path, lessons: list[Path], *, timeout: int = 600, progress=print,
          executed: Path | None = None) -> list[Page]:
    """Execute and render ``lessons`` into ``out``; returns the pages in order.

    ``executed``: a folder with the lessons already executed on the sim (same file names, as
    ``tests/delivery/run_lessons.py --save`` writes them): they are rendered as they are."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    names = {p.name: p.stem + ".html" for p in lessons}
    glossary = lessons[0].parent / GLOSSARY if lessons else None
    if glossary is not None and glossary.is_file():
        names[GLOSSARY] = GLOSSARY_PAGE
    exporter = _exporter()
    if GLOSSARY in names:
        assert glossary is not None
        (out / GLOSSARY_PAGE).write_text(render_glossary(glossary, exporter, names), encoding="utf-8")
    pages = []
    for i, path in enumerate(lessons, 1):
        started = time.monotonic()
        if executed is not None:
            done = executed / path.name
            if not done.is_file():
                raise EditionError(f"{path.name}: no executed copy in {executed}")
            nb = nbformat.read(done, as_version=4)
        else:
            progress(f"[{i}/{len(lessons)}] {path.name}: executing on the sim ...")
            nb = execute(path, timeout)
        static_widgets(nb)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        body = _fix_links(_strip_remote(body), names)
        remote = remote_references(body)
        if remote:
            raise EditionError(f"{path.name}: the page would load {remote[0]} from the network")
        (out / names[path.name]).write_text(body, encoding="utf-8")
        seconds = time.monotonic() - started
        pages.append(Page(path, names[path.name], _title(nb, path.stem),
                          None if executed is not None else seconds))
        progress(f"[{i}/{len(lessons)}] {path.name}: {names[path.name]} ({seconds:.1f}s)")

    (out / "index.html").write_text(render_index(pages, __version__, GLOSSARY in names),
                                    encoding="utf-8")
    return pages


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="gpu-lab edition",
        description="Execute the lessons on the sim and render them to static HTML with an "
        "index, browsable offline (charts as images, widgets in their static form).")
    p.add_argument("--out", type=Path, required=True, help="output folder (created)")
    p.add_argument("--lessons", nargs="+", metavar="NAME",
                   help="only these lessons (file stem or number: 00_start_here or 00)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = p.parse_args(argv)
    try:
        lessons = find_lessons(lessons_dir(), args.lessons)
        if not lessons:
            raise EditionError(f"no lessons found in {lessons_dir()}")
        build(args.out, lessons, timeout=args.timeout,
              progress=lambda msg: print(msg, flush=True))
    except GpuLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(f"error: gpu-lab edition needs nbclient and nbconvert ({exc.name} is missing): "
              f"{sys.executable} -m pip install nbclient nbconvert ipykernel", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
