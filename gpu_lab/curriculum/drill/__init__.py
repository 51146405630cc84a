"""``gpu_lab.drill``: the interview question bank, flashcards and a timed mock interview.

>>> import gpu_lab
>>> qs = gpu_lab.drill.questions(topic="mig", level="advanced")
>>> gpu_lab.drill.quiz(topic="sharing", n=5, seed=0)          # doctest: +SKIP
>>> gpu_lab.drill.mock_interview(minutes=20, n=6, seed=0)     # doctest: +SKIP

From a shell: ``gpu-lab drill export --json`` (the whole bank), ``--topic``/``--level`` to
filter. The widgets need ipywidgets (in the ``lab`` extra); everything else is plain Python.
"""

from __future__ import annotations

from ...errors import BankError, DrillError
from ...lazy import lazy_getattr
from .bank import LEVELS, TOPICS, Question, get, levels, load_bank, questions, topics, validate_bank
from .state import MARKS, MockInterview, QuizState

_WIDGETS = ("quiz", "mock_interview", "Quiz", "MockInterviewView")

__all__ = [
    "LEVELS",
    "MARKS",
    "TOPICS",
    "BankError",
    "DrillError",
    "MockInterview",
    "MockInterviewView",
    "Question",
    "Quiz",
    "QuizState",
    "get",
    "levels",
    "load_bank",
    "mock_interview",
    "questions",
    "quiz",
    "topics",
    "validate_bank",
]


# The widget layer loads on first use (ipywidgets is only in the lab and dev extras).
__getattr__ = lazy_getattr(__name__, {w: ("widgets", w) for w in _WIDGETS}, "gpu_lab.drill")
