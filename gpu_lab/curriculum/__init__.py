"""The curriculum's helpers: lab generation and checks, the interview drill.

It sits above the backends and uses only the public API (``gpu_lab.connect`` and the
``Session`` contract), exactly as a learner's notebook does.
"""
