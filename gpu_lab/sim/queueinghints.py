"""Queueing hints: which cluster events can make an unschedulable pod schedulable.

kube-scheduler v1.37 moves a pod out of unschedulablePods only when one of the plugins that
rejected it says an event may help (``EventsToRegister`` with a ``QueueingHintFn``). For an
assigned pod being added, two plugins register a hint (every other plugin's failure waits
for other events):

- InterPodAffinity ``isSchedulableAfterAssignedPodChange``: Queue when the added pod matches
  **all** of the waiting pod's required pod-affinity terms (no terms: never; anti-affinity
  can only be helped by a pod leaving);
- PodTopologySpread ``isSchedulableAfterAssignedPodChange``: Queue when the added pod is in
  the waiting pod's namespace and its labels match the selector of one of the waiting pod's
  hard (``DoNotSchedule``) constraints, its own or the profile's defaults.

So a pod whose required affinity matches nothing is not retried when an unrelated pod binds,
and keeps the message of its last attempt.
"""

from __future__ import annotations

from ..model.objects import Pod
from .plugins.interpodaffinity import required_terms
from .plugins.podtopologyspread import DO_NOT_SCHEDULE
from .profile import Profile

INTER_POD_AFFINITY = "InterPodAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
#: plugins with a hint for an assigned pod being added
ASSIGNED_POD_ADD = {INTER_POD_AFFINITY, POD_TOPOLOGY_SPREAD}


def assigned_pod_added(rejected_by: set[str], waiting: Pod, added: Pod, profile: Profile | None) -> bool:
    """Whether ``added`` being bound may make ``waiting`` (rejected by ``rejected_by``)
    schedulable: Queue from any of the rejecting plugins' hints."""
    if INTER_POD_AFFINITY in rejected_by:
        terms = required_terms(waiting, "podAffinity")
        if terms and all(t.matches(added.namespace, added.labels, None) for t in terms):
            return True
    if POD_TOPOLOGY_SPREAD in rejected_by and added.namespace == waiting.namespace:
        spread = _plugin(profile, POD_TOPOLOGY_SPREAD)
        if spread is not None and any(c.selector.matches(added.labels)
                                      for c in spread.get_constraints(waiting, DO_NOT_SCHEDULE)):
            return True
    return False


def _plugin(profile: Profile | None, name: str):
    return None if profile is None else profile.plugins.get(name)
