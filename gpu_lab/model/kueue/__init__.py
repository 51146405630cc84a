"""Kueue's API objects as gpu-lab accepts them (``kueue.x-k8s.io``): ResourceFlavor, ClusterQueue,
LocalQueue, WorkloadPriorityClass and the manager's Configuration, checked as Kueue's CRD schema,
CEL rules and webhooks check them (``parse_kueue``). Every backend admits a scenario's Kueue
objects through these; ``sim.kueue`` is the model of Kueue's controllers that acts on them.
"""
