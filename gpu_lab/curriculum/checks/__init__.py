"""``gpu_lab.labs``: the check helpers a lab's check cells call.

``gpu_lab.labs.lab02.check_fleet(lab)`` and friends live in one module per lab
(``labNN.py``); each returns a ``Feedback`` or raises ``LabCheckFailed`` with specific
feedback. ``Checklist`` is the builder they share; ``hint(N)`` shows lab N's next hint
(the answer at the last one) and ``reset_hints()`` starts them over.
"""

from __future__ import annotations

from ...errors import LabCheckFailed
from ...lazy import lazy_getattr
from .feedback import Checklist, Feedback
from .hints import Hint, hint, reset_hints

_LABS = ("lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07", "lab08", "lab09", "lab11", "lab13")

__all__ = ["Checklist", "Feedback", "Hint", "LabCheckFailed", "hint", "reset_hints", *_LABS]


__getattr__ = lazy_getattr(__name__, {lab: (lab, None) for lab in _LABS}, "gpu_lab.labs")
