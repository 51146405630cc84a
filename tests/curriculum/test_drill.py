"""The interview drill: the shipped bank, its validation, the CLI export, quiz and mock-interview
state, and the widgets' fallback rendering."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

import gpu_lab
from gpu_lab.curriculum.drill import bank as bank_mod
from gpu_lab.curriculum.drill.cli import main as drill_main
from gpu_lab.curriculum.drill.state import MockInterview, QuizState, clock_text
from gpu_lab.errors import DrillError

drill = gpu_lab.drill
LESSONS = Path(__file__).resolve().parents[2] / "lessons"
# The notebooks a question may point to (the curriculum's lessons, this drill's own notebook).
ALLOWED_LESSONS = {
    "00_start_here.ipynb", "01_device_plugin.ipynb", "02_mig.ipynb", "03_time_slicing_mps.ipynb",
    "04_bin_packing.ipynb", "05_scheduler_profiles.ipynb", "06_autoscaling_cost.ipynb",
    "07_gang_scheduling.ipynb", "08_gpu_utilisation.ipynb", "09_dra.ipynb", "10_interview.ipynb",
    "11_sharing_gpus.ipynb", "12_gpu_node_stack.ipynb", "13_topology.ipynb",
}
EXPORT_KEYS = ["id", "topic", "level", "question", "answer", "follow_ups", "lesson"]
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def raw_bank():
    return yaml.safe_load(bank_mod.BANK_PATH.read_text(encoding="utf-8"))


def good_entry(**changes):
    entry = {"id": "x-one", "topic": "mig", "level": "basic", "question": "Why?",
             "answer": "Because.", "follow_ups": ["And then?"], "lesson": "02_mig.ipynb",
             "shows": ["nvidia.com/mig.config"]}
    entry.update(changes)
    return entry


def write_notebook(path, *cells):
    """A minimal notebook: each cell given as (cell_type, source); sources as a list of lines,
    the way Jupyter stores them."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True),
                     **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                    for kind, text in cells]}
    path.write_text(json.dumps(nb), encoding="utf-8")


# ---------------------------------------------------------------- the shipped bank

def test_shipped_bank_validates(raw_bank):
    assert drill.validate_bank(raw_bank, lessons_dir=None) == []
    qs = drill.questions()
    assert len(qs) >= 60
    per_topic = Counter(q.topic for q in qs)
    assert set(per_topic) == set(drill.topics())
    assert sum(c >= 5 for c in per_topic.values()) >= 8
    assert all(c >= 5 for c in per_topic.values()), per_topic
    for topic in drill.topics():
        assert {q.level for q in qs if q.topic == topic} == set(drill.levels()), topic


def test_every_lesson_is_a_curriculum_notebook_on_disk():
    for q in drill.questions():
        assert q.lesson in ALLOWED_LESSONS, (q.id, q.lesson)
    for name in {q.lesson for q in drill.questions()}:
        assert (LESSONS / name).is_file(), f"lessons/{name} is missing"
    # With the repository's lessons/ folder present, the default check looks there too.
    assert drill.validate_bank(yaml.safe_load(bank_mod.BANK_PATH.read_text())) == []


def test_every_lesson_mentions_what_its_questions_say_it_shows(raw_bank):
    # Each cited lesson contains every `shows` term of its question: the citation is honest.
    assert drill.validate_bank(raw_bank, lessons_dir=LESSONS) == []
    for q in drill.questions():
        assert 1 <= len(q.shows) <= 3 and all(t.strip() for t in q.shows), q.id
        assert all(s != q.lesson.removesuffix(".ipynb") for s in q.see_also), q.id


def test_readme_drill_count_matches_the_bank():
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"The interview drill: (\d+) questions over (\w+) topics", text)
    assert m, "README lost its drill sentence ('The interview drill: N questions over M topics')"
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
             "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
    topics = int(m[2]) if m[2].isdigit() else words[m[2].lower()]
    qs = drill.questions()
    assert int(m[1]) == len(qs)
    assert topics == len({q.topic for q in qs})


def test_questions_are_frozen_and_normalised():
    q = drill.questions()[0]
    with pytest.raises(AttributeError):
        q.answer = "changed"
    assert "\n" not in q.answer and "  " not in q.answer
    assert isinstance(q.follow_ups, tuple) and 1 <= len(q.follow_ups) <= 3


def test_ids_are_unique_slugs():
    ids = [q.id for q in drill.questions()]
    assert len(ids) == len(set(ids))
    assert drill.get(ids[0]).id == ids[0]
    with pytest.raises(drill.BankError, match="no question"):
        drill.get("no-such-question")


def test_answers_state_the_facts_the_package_computes():
    # Numbers quoted in answers that gpu_lab computes: keep them in step.
    mps = gpu_lab.gpus.mps_share(gpu_lab.gpus.get_model("H100-80GB").memory_mib, 4)
    assert f"{mps.memory_limit_mib} MiB" in drill.get("mps-caps").answer
    lat = gpu_lab.gpus.timeslice_latency(4.0, [0.5] * 4)
    text = drill.get("ts-latency-model").answer
    assert f"{lat.mean_ms:.1f} ms" in text and f"{lat.worst_ms:.1f} ms" in text
    plan = gpu_lab.gpus.plan_mig([gpu_lab.gpus.Service("embed", 8, replicas=6),
                                  gpu_lab.gpus.Service("rerank", 18, replicas=3),
                                  gpu_lab.gpus.Service("chat", 35, replicas=2)], "H100-80GB")
    assert (plan.gpu_count, plan.whole_gpu_count) == (3, 11)
    assert "11 whole GPUs today; 3 with MIG" in drill.get("mig-planner").answer
    assert gpu_lab.gpus.get_model("H100-80GB").price_per_hour == 6.88
    assert "5 minutes" in drill.get("dp-plugin-dies").answer
    # 1g.10gb in MiB, GiB and decimal GB; 10 GiB needs 1g.20gb, 10 GB fits 1g.10gb with the rest to spare.
    profiles = {p.name: p for p in gpu_lab.gpus.mig_profiles("H100-80GB")}
    one_g, two_slice = profiles["1g.10gb"], profiles["1g.20gb"]
    usable = drill.get("mig-usable-memory")
    assert "10 GiB" in usable.question
    assert f"{one_g.memory_mib:,} MiB" in usable.answer and f"{one_g.memory_gib:.2f} GiB" in usable.answer
    assert f"{one_g.memory_mib * 2**20 / 1e9:.2f} GB" in usable.answer
    assert f"{1e10 / 2**30:.2f} GiB" in usable.answer
    assert f"{round(one_g.memory_mib - 1e10 / 2**20)} MiB to spare" in usable.answer
    assert f"{two_slice.memory_mib:,} MiB" in usable.answer and usable.answer.startswith("1g.20gb")
    assert gpu_lab.gpus.smallest_mig_profile("H100-80GB", 10).name == "1g.20gb"
    assert gpu_lab.gpus.smallest_mig_profile("H100-80GB", 1e10 / 2**30).name == "1g.10gb"


# ---------------------------------------------------------------- validate_bank error classes

@pytest.mark.parametrize("entries, expected", [
    ([{k: v for k, v in good_entry().items() if k != "answer"}], "missing key(s) answer"),
    ([good_entry(topic="networking")], "unknown topic 'networking'"),
    ([good_entry(level="expert")], "unknown level 'expert'"),
    ([good_entry(), good_entry()], "duplicate id 'x-one'"),
    ([good_entry(answer="   ")], "empty answer"),
    ([good_entry(question="")], "empty question"),
    ([good_entry(id="Not A Slug")], "is not a slug"),
    ([good_entry(follow_ups=[])], "follow_ups must be a list of 1-3"),
    ([good_entry(follow_ups=["a", "b", "c", "d"])], "follow_ups must be a list of 1-3"),
    ([good_entry(lesson="mig.md")], "is not a notebook name"),
    ([good_entry(extra=1)], "unknown key(s) extra"),
    ([good_entry(see_also="06_gang_scheduling")], "see_also must be a list"),
    ([{k: v for k, v in good_entry().items() if k != "shows"}], "missing key(s) shows"),
    ([good_entry(shows=[])], "shows must be a list of 1-3"),
    ([good_entry(shows=["a", "b", "c", "d"])], "shows must be a list of 1-3"),
    ([good_entry(shows="nvidia.com/mig.config")], "shows must be a list of 1-3"),
    ([good_entry(shows=["  "])], "shows must be a list of 1-3"),
    ({"not": "a list"}, "must be a list of questions"),
    (["just text"], "must be a mapping"),
])
def test_validate_bank_catches_each_error_class(entries, expected):
    errors = drill.validate_bank(entries, lessons_dir=None)
    assert any(expected in e for e in errors), errors


def test_validate_bank_checks_lesson_files(tmp_path):
    entries = [good_entry(), good_entry(id="x-two", lesson="09_dra.ipynb")]
    write_notebook(tmp_path / "02_mig.ipynb", ("markdown", "Relabel `nvidia.com/mig.config`."))
    errors = drill.validate_bank(entries, lessons_dir=tmp_path)
    assert errors == ["question 2 (x-two): lesson file missing: lessons/09_dra.ipynb"]
    assert drill.validate_bank(entries, lessons_dir=None) == []
    assert drill.validate_bank({"questions": [good_entry()]}, lessons_dir=tmp_path) == []


def test_validate_bank_reports_each_term_the_lesson_lacks(tmp_path):
    write_notebook(tmp_path / "01_device_plugin.ipynb",
                   ("markdown", "# 01 · The device plugin\nThe kubelet calls\n`Allocate` on the plugin."),
                   ("code", "lab.kill_plugin('h100-1')\nlab.describe_node('h100-1')"))
    entries = [good_entry(id="dp-topology", lesson="01_device_plugin.ipynb",
                          shows=["GetPreferredAllocation", "kill_plugin", "Topology Manager"])]
    errors = drill.validate_bank(entries, lessons_dir=tmp_path)
    assert errors == [
        "question 1 (dp-topology): lessons/01_device_plugin.ipynb does not mention 'GetPreferredAllocation'",
        "question 1 (dp-topology): lessons/01_device_plugin.ipynb does not mention 'Topology Manager'",
    ]
    # Code cells count, case does not, and a line break in the lesson matches a space in the term.
    ok = good_entry(id="dp-ok", lesson="01_device_plugin.ipynb",
                    shows=["KILL_PLUGIN", "kubelet calls `Allocate`", "describe_node"])
    assert drill.validate_bank([ok], lessons_dir=tmp_path) == []
    # Without a lessons folder nothing is read, so nothing is reported.
    assert drill.validate_bank(entries, lessons_dir=None) == []


def test_validate_bank_refuses_a_lesson_that_is_not_a_notebook(tmp_path):
    (tmp_path / "02_mig.ipynb").write_text("not json")
    errors = drill.validate_bank([good_entry()], lessons_dir=tmp_path)
    assert errors == ["question 1 (x-one): lesson lessons/02_mig.ipynb is not a readable notebook (JSON with cells)"]
    (tmp_path / "02_mig.ipynb").write_text("{}")
    assert drill.validate_bank([good_entry()], lessons_dir=tmp_path) == [
        "question 1 (x-one): lesson lessons/02_mig.ipynb is not a readable notebook (JSON with cells)"]


def test_shows_is_loaded_but_not_exported(tmp_path):
    path = tmp_path / "bank.yaml"
    path.write_text(yaml.safe_dump([good_entry(shows=["nvidia.com/mig.config", "all-balanced"])]))
    (q,) = drill.load_bank(path)
    assert q.shows == ("nvidia.com/mig.config", "all-balanced")
    assert list(q.to_dict()) == list(bank_mod.EXPORT_KEYS) == EXPORT_KEYS
    assert "shows" in bank_mod.REQUIRED_KEYS and "shows" not in q.to_dict()
    path.write_text(yaml.safe_dump([{k: v for k, v in good_entry().items() if k != "shows"}]))
    with pytest.raises(drill.BankError, match=r"question 1 \(x-one\): missing key\(s\) shows"):
        drill.load_bank(path)


def test_valid_entry_with_see_also_passes():
    assert drill.validate_bank([good_entry(see_also=["06_gang_scheduling"])], lessons_dir=None) == []


def test_load_bank_reports_the_first_error(tmp_path):
    path = tmp_path / "bank.yaml"
    path.write_text(yaml.safe_dump([good_entry(), good_entry(level="expert", id="x-two")]))
    with pytest.raises(drill.BankError, match=r"bank.yaml: question 2 \(x-two\): unknown level"):
        drill.load_bank(path)
    path.write_text("- id: [unclosed\n")
    with pytest.raises(drill.BankError, match="not valid YAML"):
        drill.load_bank(path)
    path.write_text(yaml.safe_dump([good_entry()]))
    (q,) = drill.load_bank(path)
    assert q.id == "x-one" and q.follow_ups == ("And then?",)


# ---------------------------------------------------------------- filters

def test_filters():
    mig = drill.questions(topic="mig")
    assert mig and all(q.topic == "mig" for q in mig)
    adv = drill.questions(level="advanced")
    assert adv and all(q.level == "advanced" for q in adv)
    both = drill.questions(topic=["mig", "dra"], level="basic")
    assert {q.topic for q in both} == {"mig", "dra"} and all(q.level == "basic" for q in both)
    assert len(drill.questions()) == sum(len(drill.questions(topic=t)) for t in drill.topics())
    with pytest.raises(drill.BankError, match="unknown topic 'gpus'"):
        drill.questions(topic="gpus")
    with pytest.raises(drill.BankError, match="unknown level"):
        drill.questions(level="hard")


# ---------------------------------------------------------------- CLI

def test_export_json_has_exactly_the_keys(capsys):
    assert drill_main(["export", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(drill.questions())
    for item in out:
        assert list(item) == EXPORT_KEYS
        assert isinstance(item["follow_ups"], list)
    assert not any("see_also" in item or "shows" in item for item in out)


def test_export_json_filters(capsys):
    assert drill_main(["export", "--json", "--topic", "mig", "--level", "advanced"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out and {(q["topic"], q["level"]) for q in out} == {("mig", "advanced")}
    assert drill_main(["export", "--json", "--topic", "mig", "--topic", "dra"]) == 0
    assert {q["topic"] for q in json.loads(capsys.readouterr().out)} == {"mig", "dra"}


def test_export_text(capsys):
    assert drill_main(["export", "--topic", "sharing", "--level", "intermediate"]) == 0
    out = capsys.readouterr().out
    n = len(drill.questions(topic="sharing", level="intermediate"))
    assert out.count("\nQ:  ") + out.startswith("Q:  ") == n
    assert f"{n} questions" in out and "lesson: lessons/03_time_slicing_mps.ipynb" in out


@pytest.mark.parametrize("argv", [[], ["export", "--topic", "nope"], ["export", "--level", "hard"],
                                  ["export", "--bogus"], ["quiz"]])
def test_bad_arguments_one_error_line_exit_2(argv, capsys):
    assert drill_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cli_validate_and_topics(tmp_path, capsys):
    assert drill_main(["validate"]) == 0
    assert "bank.yaml: valid" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump([good_entry(topic="nope")]))
    assert drill_main(["validate", str(bad)]) == 1
    assert "unknown topic 'nope'" in capsys.readouterr().out
    assert drill_main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert drill_main(["topics"]) == 0
    assert f"{len(drill.questions()):>6}" in capsys.readouterr().out


def test_gpu_lab_cli_hook(capsys):
    from gpu_lab.cli import main as gpu_lab_main

    assert gpu_lab_main(["drill", "export", "--json", "--topic", "dra"]) == 0
    assert {q["topic"] for q in json.loads(capsys.readouterr().out)} == {"dra"}


# ---------------------------------------------------------------- quiz state

def test_quiz_deck_is_seeded_and_sized():
    pool = drill.questions()
    a, b = QuizState(pool, n=10, seed=3), QuizState(pool, n=10, seed=3)
    assert [q.id for q in a.cards] == [q.id for q in b.cards]
    assert len(a.cards) == 10 and len({q.id for q in a.cards}) == 10
    assert len(QuizState(drill.questions(topic="mig"), n=100).cards) == len(drill.questions(topic="mig"))
    with pytest.raises(DrillError, match="no questions"):
        QuizState([], n=3)
    with pytest.raises(DrillError, match="positive"):
        QuizState(pool, n=0)


def test_quiz_scoring_and_summary():
    s = QuizState(drill.questions(topic=["mig", "dra"]), n=4, seed=0)
    with pytest.raises(DrillError, match="show the answer"):
        s.score("got")
    s.reveal()
    s.score("got")
    with pytest.raises(DrillError, match="already scored"):
        s.score("missed")
    s.next()
    s.reveal()
    with pytest.raises(DrillError, match="unknown self-score"):
        s.score("perfect")
    s.score("partly")
    s.next()
    s.next()  # third card skipped without revealing
    s.reveal()
    s.score("missed")
    assert s.next() is None and s.done
    assert s.points == 1.5 and s.score_text() == "1.5 / 3"
    rows = {r.topic: r for r in s.summary()}
    assert sum(r.asked for r in rows.values()) == 4
    assert sum(r.skipped for r in rows.values()) == 1
    assert sum(r.points for r in rows.values()) == 1.5
    assert [r.topic for r in s.summary()] == [t for t in drill.topics() if t in rows]
    with pytest.raises(DrillError, match="finished"):
        s.next()


# ---------------------------------------------------------------- mock interview timing

class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def tick(self, seconds):
        self.t += seconds


def test_mock_interview_plan_mixes_topics_and_rises_in_difficulty():
    m = MockInterview(drill.questions(), minutes=20, n=6, seed=7)
    ranks = [q.level_rank for q in m.cards]
    assert ranks == sorted(ranks) and ranks[0] == 0 and ranks[-1] == 2
    assert len({q.topic for q in m.cards}) == 6
    assert m.budget == 200.0
    again = MockInterview(drill.questions(), minutes=20, n=6, seed=7)
    assert [q.id for q in again.cards] == [q.id for q in m.cards]
    nine = MockInterview(drill.questions(), n=9, seed=1)
    assert len({q.topic for q in nine.cards}) == 9


def test_mock_interview_timing_with_an_injected_clock():
    clock = FakeClock()
    m = MockInterview(drill.questions(), minutes=10, n=4, seed=2, clock=clock)
    assert m.budget == 150.0 and not m.started and m.elapsed() == 0.0
    with pytest.raises(DrillError, match="start the interview"):
        m.reveal()
    m.start()
    clock.tick(40)
    assert m.elapsed() == 40 and m.time_left() == 110
    m.reveal()
    clock.tick(30)  # reading the model answer does not count
    assert m.elapsed() == 40 and m.revealed
    m.score("got")
    m.next()
    clock.tick(200)  # over budget
    assert m.time_left() == -50 and clock_text(m.time_left()) == "-0:50"
    m.reveal()
    m.score("partly")
    m.next()
    clock.tick(10)
    m.next()  # moved on without revealing: counts 10 s, skipped
    clock.tick(60)
    m.reveal()
    with pytest.raises(DrillError, match="unknown self-score"):
        m.score("great")
    m.score("missed")
    assert m.next() is None and m.done
    report = m.report()
    assert [r.seconds for r in report] == [40, 200, 10, 60]
    assert [r.over for r in report] == [False, True, False, False]
    assert [r.mark for r in report] == ["got", "partly", None, "missed"]
    assert m.points == 1.5
    assert m.total_elapsed() == 40 + 30 + 200 + 10 + 60
    clock.tick(999)
    assert m.total_elapsed() == 340  # frozen at the end
    with pytest.raises(DrillError, match="over"):
        m.next()


def test_mock_interview_rejects_bad_input():
    with pytest.raises(DrillError, match="minutes"):
        MockInterview(drill.questions(), minutes=0)
    with pytest.raises(DrillError, match="positive"):
        MockInterview(drill.questions(), n=0)
    m = MockInterview(drill.questions(), n=2, clock=FakeClock())
    m.start()
    with pytest.raises(DrillError, match="already started"):
        m.start()
    with pytest.raises(DrillError, match="reveal"):
        m.score("got")


def test_clock_text():
    assert clock_text(0) == "0:00" and clock_text(200) == "3:20" and clock_text(-61) == "-1:01"


# ---------------------------------------------------------------- widgets

def _check_fallback(bundle, cards):
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html_text = bundle["text/html"]
    for q in cards:
        assert q.id in html_text
    # Questions come before their answers, which are folded away.
    first = cards[0]
    import html as _html

    assert html_text.index(_html.escape(first.question)) < html_text.index(_html.escape(first.answer))
    assert html_text.count("<details>") == len(cards)
    assert "<details>" in bundle["text/markdown"]
    plain = bundle["text/plain"]
    assert plain.index(cards[-1].question) < plain.index(first.answer)


def test_quiz_widget_builds_and_falls_back():
    pytest.importorskip("ipywidgets")
    view = drill.quiz(topic="mig", n=3, seed=1)
    bundle = view._repr_mimebundle_()
    _check_fallback(bundle, view.cards)
    assert view.answer.value == ""
    view.click("got")  # ignored: answer not shown yet
    assert view.state.answered == 0
    view.click("reveal")
    assert view.cards[0].answer.split()[0] in view.answer.value
    assert view.buttons["reveal"].disabled and not view.buttons["got"].disabled
    view.click("got")
    assert view.buttons["got"].disabled and "score 1 / 1" in view.header.value
    view.click("next")
    view.click("reveal")
    view.click("missed")
    view.click("next")
    view.click("next")
    assert view.state.done and "Per topic" in view.question.value
    assert view.buttons["next"].layout.display == "none"


def test_mock_interview_widget_builds_and_reports():
    pytest.importorskip("ipywidgets")
    view = drill.mock_interview(minutes=6, n=3, seed=0)
    clock = FakeClock()
    view.state.clock = clock
    _check_fallback(view._repr_mimebundle_(), view.cards)
    assert "2:00" in view._repr_mimebundle_()["text/html"]  # budget per question in the note
    assert view.buttons["reveal"].layout.display == "none"
    view.click("start")
    assert "2:00</b> left" in view.clock.value
    clock.tick(150)
    view.click("reveal")
    assert "-0:30</b> left" in view.clock.value and "clock stopped" in view.clock.value
    view.click("partly")
    view.click("next")
    clock.tick(20)
    view.click("reveal")
    view.click("got")
    view.click("next")
    view.click("next")
    assert view.state.done
    assert "(over)" in view.question.value and "Per topic" in view.question.value
    assert "1 of 3 answers over their time budget" in view.question.value
    view.stop()


def test_widgets_without_ipywidgets_still_render(monkeypatch):
    from gpu_lab.curriculum.drill import widgets

    monkeypatch.setattr(widgets, "_ipywidgets", lambda: None)
    view = widgets.quiz(n=2, seed=0)
    assert view.widget is None
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    assert bundle["text/html"].count("<details>") == 2
    view.click("reveal")  # the state still works
    assert view.state.revealed
    mock = widgets.mock_interview(n=2, seed=0)
    assert "text/markdown" in mock._repr_mimebundle_()


def test_public_namespace():
    assert "quiz" in drill.__all__ and "mock_interview" in drill.__all__
    for name in drill.__all__:
        assert getattr(drill, name) is not None
    assert copy.copy(drill.questions()[0]) == drill.questions()[0]
