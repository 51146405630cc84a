"""The static reading edition: lessons executed on the sim, rendered to HTML that a
browser can read offline. Checked for broken links, missing images and anything a page
would fetch from the network (a CDN script, a remote stylesheet or image).

The whole edition is rendered in test_binder.py from the Binder environment's execution of
every lesson (each lesson executes once per run); here two lessons are executed and
rendered through the command line."""

from __future__ import annotations

import pytest
from delivery_support import LESSONS, check_site

from gpu_lab import cli, edition

pytestmark = pytest.mark.delivery


def test_two_lessons_build_offline(tmp_path, capfd):
    chosen = [p for p in LESSONS if p.stem.startswith(("00_", "10_"))]
    assert len(chosen) == 2
    assert cli.main(["edition", "--out", str(tmp_path), "--lessons", "00", "10"]) == 0
    out, err = capfd.readouterr()  # capfd: the kernels' own stderr included
    assert "wrote" in out
    assert "without encryption" not in err  # the kernels run over IPC, not TCP
    images = check_site(tmp_path, chosen)
    assert images["00_start_here.html"] >= 1  # the occupancy charts, as SVG images
    drill = (tmp_path / "10_interview.html").read_text(encoding="utf-8")
    assert "Flashcards" in drill  # the drill widget's static rendering
    # a lesson not in this edition is named as a repository file, not a dangling link
    assert "01_device_plugin.ipynb</code> in the repository" in (
        tmp_path / "00_start_here.html").read_text(encoding="utf-8")


def test_under_the_hood_keeps_its_text(tmp_path):
    """A folded section's markdown renders inside its <details>, as in JupyterLab."""
    import nbformat
    from delivery_support import parse_page

    cell = ("## A heading\n\n<details><summary>Under the hood: *why*</summary>\n\n"
            "The kubelet picks the **IDs**.\n\n- one\n- two\n\n</details>\n\nAfter it.")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cell)])
    body, _ = edition._exporter().from_notebook_node(nb)
    (tmp_path / "page.html").write_text(body, encoding="utf-8")
    assert parse_page(tmp_path / "page.html").details == [5]  # p, strong, ul and its two li
    inside = body[body.index("<details>"):body.index("</details>")]
    assert "picks the <strong>IDs</strong>" in inside and "<li>two</li>" in inside
    assert "After it." not in inside


def test_unknown_lesson_is_one_line_error(tmp_path, capsys):
    assert edition.main(["--out", str(tmp_path), "--lessons", "99_nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith('error: no lesson "99_nope"') and "00_start_here" in err


def test_remote_references_are_found():
    page = ('<script type="module">await import("https://cdn.x/m.mjs")</script>'
            '<img src="https://x/y.png"><link rel="stylesheet" href="//cdn/x.css">'
            '<style>@import url("https://f/a.css")</style><a href="https://cite.example">ok</a>')
    assert edition.remote_references(page) == [
        "https://x/y.png", "//cdn/x.css", "https://f/a.css", "https://cdn.x/m.mjs"]
    assert edition.remote_references(edition._strip_remote(page).replace(
        '<img src="https://x/y.png">', "")) == ["//cdn/x.css", "https://f/a.css"]


def test_kernels_start_where_the_runtime_directory_is_long(tmp_path, monkeypatch):
    """A Unix socket's path may not pass 107 bytes: gpu-lab's kernels keep theirs short even
    when Jupyter's runtime directory is deep (as under a test's tmp folder)."""
    import nbformat

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(deep))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    ran = edition.execute(path, timeout=60)
    assert ran.cells[0].outputs[0]["text"] == "42\n"
    assert len(str(deep)) > 107  # the runtime directory alone is too long for a socket path
