"""``gpu-lab labs``: labs are generated from solutions, deterministically, and CI catches drift."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from gpu_lab.cli import main as cli_main
from gpu_lab.curriculum import labs, notebooks
from gpu_lab.errors import GpuLabError

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS, LABS = REPO / "solutions", REPO / "labs"

FUNCTION = '''def pick(nodes):
    """Pick a node."""
    ### BEGIN SOLUTION
    # choose the emptiest node
    best = min(nodes)
    return best
    ### END SOLUTION


answer = pick([3, 1])'''


def write_solution(folder: Path, name: str = "01_demo.ipynb", cells=None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells if cells is not None else [
        nbformat.v4.new_markdown_cell("# Demo lab\nDo the thing."),
        nbformat.v4.new_code_cell(FUNCTION),
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\nprint(x)"),
        nbformat.v4.new_code_cell("check(answer)\n### BEGIN HIDDEN TESTS\nassert answer == 1\n"
                                  "### END HIDDEN TESTS", metadata={"tags": ["check"]}),
    ]
    if cells is None:
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="leaked 1\n")]
        nb.cells[1].execution_count = 7
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Py", "language": "python"},
                   "language_info": {"name": "python", "version": "3.11.7"}, "widgets": {"x": 1}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    nbformat.write(nb, path)
    return path


@pytest.fixture
def tree(tmp_path):
    write_solution(tmp_path / "solutions")
    return tmp_path / "solutions", tmp_path / "labs"


def read_lab(path: Path):
    return nbformat.read(path, as_version=4)


# ------------------------------------------------------------------ markers
def test_solution_block_becomes_a_stub_at_its_indentation():
    out = labs.transform_source(FUNCTION)
    assert "min(nodes)" not in out and "return best" not in out and "BEGIN" not in out
    assert '    raise NotImplementedError("Your turn: choose the emptiest node")' in out.split("\n")
    assert out.startswith('def pick(nodes):\n    """Pick a node."""\n')
    assert out.endswith("\n\n\nanswer = pick([3, 1])")


def test_block_without_a_comment_gets_the_default_hint():
    out = labs.transform_source("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\nprint(x)")
    assert out == 'raise NotImplementedError("Your turn: write this part")\nprint(x)'


def test_hint_is_a_valid_python_string_even_with_quotes():
    out = labs.transform_source('  ### BEGIN SOLUTION\n  # say "hi" \\ there\n  pass\n  ### END SOLUTION')
    assert out == '  raise NotImplementedError("Your turn: say \\"hi\\" \\\\ there")'
    compile("if True:\n" + out, "<lab>", "exec")


def test_hidden_tests_are_removed():
    out = labs.transform_source("a = 1\n    ### BEGIN HIDDEN TESTS\nassert a == 1\n### END HIDDEN TESTS\nb = 2")
    assert out == "a = 1\nb = 2"


def test_generated_lab_clears_outputs_and_keeps_markdown_and_tags(tree):
    solutions, lab_dir = tree
    [path] = labs.generate(solutions, lab_dir)
    assert path == lab_dir / "01_demo.ipynb"
    nb = read_lab(path)
    note = nb.cells[0]
    assert note.cell_type == "markdown"
    assert note.source == ("Generated from solutions/01_demo.ipynb by `gpu-lab labs generate`: "
                           "edit the solution, not this file.")
    assert nb.cells[1].source == "# Demo lab\nDo the thing."
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert code[2].metadata == {"tags": ["check"]}
    assert code[2].source == "check(answer)"
    assert "leaked" not in path.read_text() and "min(nodes)" not in path.read_text()
    assert nb.metadata == {"kernelspec": notebooks.KERNELSPEC, "language_info": notebooks.LANGUAGE_INFO}
    assert nb.metadata["kernelspec"]["display_name"] == "Python 3 (ipykernel)"  # as JupyterLab writes it
    nbformat.validate(nb)


def test_generate_is_deterministic_byte_for_byte(tree, tmp_path):
    solutions, lab_dir = tree
    [path] = labs.generate(solutions, lab_dir)
    first = path.read_bytes()
    other = tmp_path / "again"
    [again] = labs.generate(solutions, other)
    assert again.read_bytes() == first
    assert first.endswith(b"}\n") and not first.endswith(b"\n\n")
    # the same solution with different outputs/metadata noise gives the same lab
    nb = nbformat.read(solutions / "01_demo.ipynb", as_version=4)
    nb.cells[1].execution_count = 99
    nb.cells[1].metadata["execution"] = {"iopub.status.busy": "2024-01-01"}
    nb.metadata["language_info"]["version"] = "3.12.0"
    nbformat.write(nb, solutions / "01_demo.ipynb")
    assert labs.lab_text(solutions / "01_demo.ipynb").encode() == first


def test_generate_ignores_files_without_the_nn_prefix_and_removes_orphaned_labs(tree):
    solutions, lab_dir = tree
    (solutions / "README.md").write_text("x")
    write_solution(solutions, "scratch.ipynb")
    write_solution(solutions, "02_second.ipynb")
    assert [p.name for p in labs.generate(solutions, lab_dir)] == ["01_demo.ipynb", "02_second.ipynb"]
    (solutions / "02_second.ipynb").unlink()
    labs.generate(solutions, lab_dir)
    assert sorted(p.name for p in lab_dir.iterdir()) == ["01_demo.ipynb"]


# ------------------------------------------------------------------ drift
def test_check_reports_missing_stale_and_extra(tree):
    solutions, lab_dir = tree
    assert labs.check(solutions, lab_dir) == [
        f"{lab_dir / '01_demo.ipynb'}: missing (generated from {solutions / '01_demo.ipynb'})"]
    labs.generate(solutions, lab_dir)
    assert labs.check(solutions, lab_dir) == []

    nb = nbformat.read(solutions / "01_demo.ipynb", as_version=4)
    nb.cells[0].source += "\nA new sentence."
    nbformat.write(nb, solutions / "01_demo.ipynb")
    [stale] = labs.check(solutions, lab_dir)
    assert stale.startswith(f"{lab_dir / '01_demo.ipynb'}: stale")

    nbformat.write(nbformat.v4.new_notebook(), lab_dir / "07_by_hand.ipynb")
    problems = labs.check(solutions, lab_dir)
    assert len(problems) == 2 and "07_by_hand.ipynb: extra" in problems[1]
    labs.generate(solutions, lab_dir)  # a hand-written lab is reported, never deleted
    assert (lab_dir / "07_by_hand.ipynb").exists()
    assert [p for p in labs.check(solutions, lab_dir) if "stale" in p] == []


def test_cli_check_lists_drift_with_the_fix_and_exits_1(tree, capsys):
    solutions, lab_dir = tree
    args = ["--solutions", str(solutions), "--labs", str(lab_dir)]
    assert cli_main(["labs", "check", *args]) == 1
    out = capsys.readouterr().out
    assert "01_demo.ipynb: missing" in out and "run `gpu-lab labs generate --solutions" in out
    assert cli_main(["labs", "generate", *args]) == 0
    assert "wrote" in capsys.readouterr().out
    assert cli_main(["labs", "check", *args]) == 0
    assert "agrees" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    ([], "choose an action"),
    (["bogus"], "invalid choice"),
    (["check", "--nope"], "unrecognized arguments"),
    (["check", "--solutions"], "expected one argument"),
])
def test_cli_bad_arguments_are_one_error_line(argv, words, capsys):
    assert cli_main(["labs", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and words in captured.err
    assert captured.err.count("\n") == 1


def test_cli_missing_or_empty_solutions_dir_is_exit_2(tmp_path, capsys):
    assert cli_main(["labs", "check", "--solutions", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope'}: no such directory\n"
    assert cli_main(["labs", "generate", "--solutions", str(tmp_path), "--labs", str(tmp_path)]) == 2
    assert "no NN_*.ipynb solution notebooks" in capsys.readouterr().err


# ------------------------------------------------------------------ bad markers
BAD = [
    ("### BEGIN SOLUTION\nx = 1", "line 1: '### BEGIN SOLUTION' is never closed"),
    ("x = 1\n### END SOLUTION", "line 2: '### END SOLUTION' without '### BEGIN SOLUTION'"),
    ("### BEGIN SOLUTION\n  ### BEGIN SOLUTION\n### END SOLUTION\n### END SOLUTION",
     "line 2: '### BEGIN SOLUTION' inside the '### BEGIN SOLUTION' block opened at line 1"),
    ("### BEGIN HIDDEN TESTS\n### BEGIN SOLUTION\n### END SOLUTION\n### END HIDDEN TESTS",
     "line 2: '### BEGIN SOLUTION' inside the '### BEGIN HIDDEN TESTS' block"),
    ("### BEGIN SOLUTION\n### END HIDDEN TESTS", "without '### BEGIN HIDDEN TESTS' before it "
                                                 "(the open block is '### BEGIN SOLUTION'"),
    ("## BEGIN SOLUTION\nx = 1\n### END SOLUTION", "line 1: '## BEGIN SOLUTION' is not a marker"),
    ("### Begin Solution\nx = 1", "is not a marker"),
]


@pytest.mark.parametrize("source, words", BAD)
def test_bad_markers_are_one_line_errors_naming_file_and_cell(tmp_path, source, words):
    cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("ok = 1"),
             nbformat.v4.new_code_cell(source)]
    write_solution(tmp_path / "solutions", cells=cells)
    with pytest.raises(GpuLabError) as err:
        labs.generate(tmp_path / "solutions", tmp_path / "labs")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{tmp_path / 'solutions' / '01_demo.ipynb'}: cell 2: ")
    assert words in text
    assert not (tmp_path / "labs" / "01_demo.ipynb").exists()  # nothing half-written


def test_markers_in_a_markdown_cell_are_refused(tmp_path, capsys):
    cells = [nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nthe answer\n### END SOLUTION")]
    write_solution(tmp_path / "solutions", cells=cells)
    assert cli_main(["labs", "generate", "--solutions", str(tmp_path / "solutions"),
                     "--labs", str(tmp_path / "labs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cell 0: solution markers belong in code cells" in err


# ------------------------------------------------------------------ the repository
def test_repository_labs_are_what_generate_writes():
    """CI's drift check: every labs/NN_*.ipynb equals what its solution generates."""
    problems = labs.check(SOLUTIONS, LABS)
    assert not problems, "labs/ is out of date; run `gpu-lab labs generate`:\n" + "\n".join(problems)


def test_drift_in_a_copy_of_the_repository_is_caught(tmp_path):
    solutions, lab_dir = tmp_path / "solutions", tmp_path / "labs"
    shutil.copytree(SOLUTIONS, solutions)
    labs.generate(solutions, lab_dir)
    assert labs.check(solutions, lab_dir) == []
    first = labs.find_solutions(solutions)[0]
    nb = nbformat.read(first, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source)
    cell.source = cell.source.replace("### BEGIN SOLUTION", "### BEGIN SOLUTION\n# a new hint", 1)
    nbformat.write(nb, first)
    [problem] = labs.check(solutions, lab_dir)
    assert problem.startswith(f"{lab_dir / first.name}: stale")
