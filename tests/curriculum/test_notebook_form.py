"""Notebooks are committed without outputs and with JupyterLab's metadata, and the git filter
that `make setup` installs keeps a learner's run out of diffs and commits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_lab.curriculum import notebooks

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for d in ("lessons", "labs", "solutions") for p in (REPO / d).glob("*.ipynb"))


def _ran(nb: dict) -> dict:
    """``nb`` as JupyterLab leaves it after Run All and an autosave."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"]["language_info"]["version"] = "3.11.2"
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
            cell["metadata"]["execution"] = {"iopub.execute_input": "2026-12-03T10:00:00Z"}
            cell["metadata"]["scrolled"] = True
    return nb


def test_every_committed_notebook_is_in_committed_form():
    assert len(COMMITTED) >= 30
    assert notebooks.problems(COMMITTED) == []
    nb = json.loads(COMMITTED[0].read_text())
    assert nb["metadata"]["kernelspec"] == notebooks.KERNELSPEC
    assert nb["metadata"]["kernelspec"]["display_name"] == "Python 3 (ipykernel)"


def test_clean_drops_what_a_run_writes_and_keeps_the_lesson():
    original = json.loads((REPO / "lessons" / "00_start_here.ipynb").read_text())
    ran = _ran(original)
    text = json.dumps(ran, indent=1)
    assert notebooks.clean(text) == notebooks.dumps(original)
    assert notebooks.clean("not json {") == "not json {"  # a filter never loses a file
    # a cell added without an id (nbformat 4.5 requires one) gets one, stable from its place
    bare = json.loads(json.dumps(original))
    bare["cells"].insert(1, {"cell_type": "markdown", "metadata": {}, "source": ["new"]})
    cleaned = json.loads(notebooks.clean(json.dumps(bare)))
    ids = [c["id"] for c in cleaned["cells"]]
    assert ids[1] == "cell-1" and len(set(ids)) == len(ids)
    (found,) = notebooks.problems([_write(ran)])
    assert "outputs or execution counts" in found and "metadata" in found


def test_tags_survive_the_filter():
    nb = json.loads((REPO / "solutions" / "01_device_plugin_outage.ipynb").read_text())
    tagged = [c["metadata"]["tags"] for c in nb["cells"] if c["metadata"].get("tags")]
    assert tagged
    cleaned = json.loads(notebooks.clean(json.dumps(_ran(nb))))
    assert [c["metadata"]["tags"] for c in cleaned["cells"] if c["metadata"].get("tags")] == tagged


def test_check_and_fix_from_the_command_line(tmp_path):
    path = _write(_ran(json.loads(COMMITTED[0].read_text())), tmp_path / "ran.ipynb")
    cmd = [sys.executable, "-m", "gpu_lab.curriculum.notebooks"]
    check = subprocess.run([*cmd, "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 1 and "ran.ipynb: outputs or execution counts" in check.stderr
    assert "notebooks fix" in check.stderr
    assert subprocess.run([*cmd, "fix", str(path)]).returncode == 0
    assert path.read_text() == COMMITTED[0].read_text()
    assert subprocess.run([*cmd, "bogus"], capture_output=True).returncode == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_run_is_no_change_to_git(tmp_path):
    """The filter as `make setup` installs it: a run's outputs are no change to git."""
    lesson = tmp_path / "lessons" / "00_start_here.ipynb"
    lesson.parent.mkdir()
    shutil.copy(REPO / "lessons" / "00_start_here.ipynb", lesson)
    shutil.copy(REPO / ".gitattributes", tmp_path / ".gitattributes")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "filter.gpulab-notebook.clean", f"{sys.executable} -m gpu_lab.curriculum.notebooks clean")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "lesson")
    lesson.write_text(json.dumps(_ran(json.loads(lesson.read_text())), indent=1))
    # git lists a file whose size changed until the index is refreshed, but no diff, no
    # staged change and no commit sees the run
    assert git("diff", "--stat") == ""
    git("add", "-A")
    assert git("status", "--porcelain") == ""
    # an edit to the lesson itself is still a change
    nb = json.loads(lesson.read_text())
    nb["cells"][0]["source"].append("\nOne more line.")
    lesson.write_text(json.dumps(nb, indent=1))
    assert git("status", "--porcelain").strip() == "M lessons/00_start_here.ipynb"
    git("add", "-A")
    staged = json.loads(git("show", ":lessons/00_start_here.ipynb"))
    assert all(c.get("outputs") in (None, []) for c in staged["cells"])


def _write(nb: dict, path: Path | None = None) -> Path:
    import tempfile

    path = path or Path(tempfile.mkdtemp()) / "nb.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    return path
