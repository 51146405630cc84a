"""gpu-lab's clock annotations, checked with the rest of a scenario (every backend refuses the same).

``gpulab.dev/submit-at`` (when an object is created on the simulated clock),
``gpulab.dev/duration`` (how long a pod runs) and, on Jobs, ``gpulab.dev/rendezvous``
and ``gpulab.dev/rendezvous-timeout`` (distributed training: see ``sim/training.py``).
"""

from __future__ import annotations

from typing import Any

from ..errors import GpuLabError
from .duration import DURATION_ANNOTATION, SUBMIT_AT_ANNOTATION, parse_duration

RENDEZVOUS = "gpulab.dev/rendezvous"
RENDEZVOUS_TIMEOUT = "gpulab.dev/rendezvous-timeout"


def submit_time(annotations: dict) -> float:
    """Seconds on the simulated clock at which the object is created (0 without the annotation)."""
    text = annotations.get(SUBMIT_AT_ANNOTATION)
    return 0.0 if text is None else parse_duration(text, SUBMIT_AT_ANNOTATION)


def rendezvous_settings(record: dict) -> tuple[bool, float | None]:
    """(is a rendezvous Job, its timeout in seconds or None) from the Job's annotations."""
    ann = (record.get("raw", {}).get("metadata") or {}).get("annotations") or {}
    value = ann.get(RENDEZVOUS)
    if value is None:
        return False, None
    if value not in ("true", "false"):
        raise GpuLabError(f'Job.batch "{record["name"]}": annotation {RENDEZVOUS}: must be "true" or '
                          f'"false", not "{value}"')
    timeout = ann.get(RENDEZVOUS_TIMEOUT)
    seconds = parse_duration(timeout, RENDEZVOUS_TIMEOUT) if timeout is not None else None
    return value == "true", seconds


def check_timing(sc: Any) -> None:
    """Every clock annotation of a parsed scenario parses (before anything is applied)."""
    for p in sc.pods:
        if p.annotations.get(DURATION_ANNOTATION):
            parse_duration(p.annotations[DURATION_ANNOTATION])
        submit_time(p.annotations)
    for record in sc.workloads:
        submit_time((record["raw"].get("metadata") or {}).get("annotations") or {})
        if record["kind"] == "Job":
            rendezvous_settings(record)
            ann = record["template"]["metadata"].get("annotations") or {}
            if ann.get(DURATION_ANNOTATION):
                parse_duration(ann[DURATION_ANNOTATION])
