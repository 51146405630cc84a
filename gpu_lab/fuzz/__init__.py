"""A differential fuzz: random valid scenarios (``generate``), each run on the sim and on
the real kube-scheduler of a private local lab and compared as the fidelity suite compares
(``compare``); ``gpu-lab fuzz`` (``cli``) prints per seed whether they agree."""

from .compare import Known, Result, known_differences, run_seed, scenario_text
from .generate import scenario

__all__ = ["Known", "Result", "known_differences", "run_seed", "scenario", "scenario_text"]
