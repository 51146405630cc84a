"""StatefulSets, DaemonSets and Services on the real control plane.

The simulator's refusals of bad StatefulSets, DaemonSets and Services are checked against
the API server itself (the manifest sent as it is, bypassing gpu-lab's own checks); a
Service gets a cluster IP from the lab's service CIDR; the controllers' pods run on the
node agents' nodes as the simulator places them.
"""

from __future__ import annotations

import ipaddress

import pytest
from realcluster import refused_alike, shared_lab

from gpu_lab.backends.local.flags import SERVICE_CIDR

BAD = [
    """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: Db}
spec:
  podManagementPolicy: Random
  selector: {}
  template: {metadata: {labels: {app: db}}, spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}
""",
    """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: -1
  serviceName: Db_
  selector: {matchLabels: {app: other}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: x}]}}
""",
    """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d}
spec:
  template: {metadata: {labels: {app: d}}, spec: {containers: [{name: c, image: x}]}}
""",
    """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d}
spec:
  selector: {}
  template: {metadata: {labels: {app: d}}, spec: {restartPolicy: OnFailure, containers: [{name: c, image: x}]}}
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  selector: {"a b": c}
  ports: [{port: 0, protocol: ICMP}, {port: 80}]
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {selector: {app: s}}
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  ports: [{name: web, port: 80}, {name: web, port: 70000, targetPort: 0}, {name: x, port: 81, targetPort: Web--}]
  sessionAffinity: Sticky
""",
    """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2147483648
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: x}]}}
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  ports: [{port: "80"}]
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  selector: {app: 1}
  ports: [{port: 80}]
""",
    """
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  type: NodeBalancer
  ports: [{port: 80, name: HTTP}]
""",
]


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the real-cluster tests")


@pytest.mark.controlplane
@pytest.mark.parametrize("text", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_the_simulator_refuses_in_the_api_servers_words(text, local):
    refused_alike(text, local)


@pytest.mark.controlplane
def test_a_service_gets_a_cluster_ip_and_a_stateful_pod_its_identity(local):
    local.reset()
    local.apply("""
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
""")
    pods = local.schedule().set_index("name")
    assert sorted(pods.index) == ["db-0", "db-1"] and set(pods["phase"]) == {"Running"}
    svc = local.client.get("Service", "db", namespace="default")
    assert ipaddress.ip_address(svc["spec"]["clusterIP"]) in ipaddress.ip_network(SERVICE_CIDR)
    pod = local.client.get("Pod", "db-1", namespace="default")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("db-1", "db")
    assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    local.reset()  # the Service and the StatefulSet go with the rest, the API server's own Service stays
    assert [s["metadata"]["name"] for s in local.client.list("Service", namespace="default")["items"]] == [
        "kubernetes"]
    assert not local.client.list("StatefulSet", namespace="default")["items"]
