"""The DRA side of the node agent: NVIDIA's DRA driver publishing its DeviceClasses and each
DRA node's ResourceSlices, and the kubelet's PrepareResources for a pod with ResourceClaims
(``dradriver.prepare``); claims not ready yet get a ``FailedPrepareDynamicResources``
event and another try a second later, as the kubelet retries."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

from ..dradriver import prepare as dra
from ..dradriver import resourceslices as rs
from ..errors import NodeAgentError
from ..kube import AlreadyExists, ApiError, KubeClient, NotFound
from . import events
from .node import AgentNode, PodState

log = logging.getLogger("gpu_lab.nodeagent")

PREPARE_RETRY_S = 1.0  # a pod whose ResourceClaims cannot be prepared yet is tried again


def publish(client: KubeClient, nodes: Iterable[AgentNode]) -> None:
    """The driver's DeviceClasses (what its Helm chart installs; one that exists is left
    alone) and each DRA node's ResourceSlices, replacing those of an earlier run."""
    dra_nodes = [sn for sn in nodes if sn.dra_devices]
    if not dra_nodes:
        return
    for dc in rs.device_classes():
        with contextlib.suppress(AlreadyExists):
            client.create(dc)
    for sn in dra_nodes:
        old = client.list("ResourceSlice", api_version=rs.API_VERSION,
                          field_selector=f"spec.nodeName={sn.name},spec.driver={rs.DRIVER}")["items"]
        generation = max((o["spec"]["pool"].get("generation", 0) for o in old), default=0)
        for o in old:  # the kubelet's slice controller bumps the pool's generation instead
            client.delete("ResourceSlice", o["metadata"]["name"], api_version=rs.API_VERSION,
                          missing_ok=True)
        for body in rs.resource_slices(sn.node, sn.uid, generation + 1):
            try:
                client.create(body)
            except ApiError as err:
                raise NodeAgentError(f"cannot publish the ResourceSlices of {sn.name}: {err}") from None
        log.info("%s: published %d DRA device(s) of driver %s", sn.name, len(sn.dra_devices), rs.DRIVER)


def prepare_claims(client: KubeClient, sn: AgentNode, st: PodState, pod: dict,
                   retry: Callable[[float], object]) -> dra.Prepared | None:
    """The pod's claims' devices, or None: then a Warning event (once per reason) and
    ``retry(PREPARE_RETRY_S)``."""
    namespace = pod["metadata"]["namespace"]

    def get_claim(name: str) -> dict | None:
        try:
            return client.get("ResourceClaim", name, namespace, api_version=rs.API_VERSION)
        except NotFound:
            return None

    try:
        return dra.prepare(pod, sn.name, sn.dra_devices, get_claim)
    except dra.NotPrepared as err:
        message = f"Failed to prepare dynamic resources: prepare dynamic resources: {err}"
        if message != st.prepare_error:
            st.prepare_error = message
            log.info("%s: %s: %s", sn.name, st.key, message)
            events.warning(client, sn.name, pod, "FailedPrepareDynamicResources", message)
        retry(PREPARE_RETRY_S)
        return None
