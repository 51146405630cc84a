"""The Kubernetes client layer every real backend uses (local, kubeconfig, kind).

Built on the official ``kubernetes`` package: its ``kubernetes.config`` reads kubeconfigs
and in-cluster ServiceAccounts, its ``ApiClient`` (one urllib3 connection pool per client)
carries every request, and objects stay plain dicts, the API server's JSON.

* :mod:`~gpu_lab.kube.kubeconfig`: :class:`Credentials` from a kubeconfig or in-cluster;
  the kubeconfigs a local lab writes
* :mod:`~gpu_lab.kube.execcredential`: exec credential plugins (EKS, GKE, AKS, kubelogin
  for OIDC), run the way client-go runs them
* :mod:`~gpu_lab.kube.client`: :class:`KubeClient` (get, list, create, update, patch,
  delete, watch, discovery)
* :mod:`~gpu_lab.kube.watch`: the one watch, cancellable from another thread
* :mod:`~gpu_lab.kube.errors`: API errors as one line in the API server's words
"""

from ..errors import KubeconfigError
from .client import KubeClient
from .errors import AlreadyExists, ApiError, Conflict, NotFound, Unreachable
from .kubeconfig import Credentials
from .watch import CancellableWatch, WatchEvent

__all__ = [
    "AlreadyExists",
    "ApiError",
    "CancellableWatch",
    "Conflict",
    "Credentials",
    "KubeClient",
    "KubeconfigError",
    "NotFound",
    "Unreachable",
    "WatchEvent",
]
