"""The kubelet's admission of a pod the scheduler bound to its node.

Shared by the simulator and the local backend's node agent, so both reject the same
pods with the same words. The order is the kubelet's: the device manager allocates the
pod's devices first (an Allocate failure is ``UnexpectedAdmissionError``), then the
resource check (``OutOf<resource>``). Every rejection message starts with
``Pod was rejected: `` (``kubelet.rejectPod``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model.objects import is_extended_resource

REJECTED_PREFIX = "Pod was rejected: "
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
FIT_ORDER = ("pods", "cpu", "memory", "ephemeral-storage")


def fit_failure(
    requests: Mapping[str, int],
    used: Mapping[str, int],
    pods_used: int,
    allocatable: Mapping[str, int],
) -> tuple[str, str] | None:
    """(reason, message) when the node cannot hold the pod, else None."""

    def short(r: str, want: int, have_used: int, cap: int) -> tuple[str, str]:
        return (
            f"OutOf{r}",
            f"{REJECTED_PREFIX}Node didn't have enough resource: {r}, requested: {want}, "
            f"used: {have_used}, capacity: {cap}",
        )

    cap_pods = allocatable.get("pods", 0)
    if pods_used + 1 > cap_pods:
        return short("pods", 1, pods_used, cap_pods)
    rest = [r for r in requests if r not in FIT_ORDER]
    rest.sort()
    for r in (*FIT_ORDER[1:], *rest):
        want = requests.get(r, 0)
        if want <= 0:
            continue
        if r not in allocatable and is_extended_resource(r):
            continue  # removeMissingExtendedResources
        cap, u = allocatable.get(r, 0), used.get(r, 0)
        if want > cap - u:
            return short(r, want, u, cap)
    return None


def admission_error_message(err: Exception) -> str:
    """The pod message of a device-manager rejection (``DeviceAllocationError``)."""
    text = (
        getattr(err, "admission_message", None)
        or f"Allocate failed due to {err}, which is unexpected"
    )
    return REJECTED_PREFIX + text
