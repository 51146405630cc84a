"""NodePools the real-cluster and node-agent tests share, each written once.

Tests that need a pool of their own keep it beside them; these are the ones several
suites run unchanged (tainted H100s, time-sliced T4, mixed-MIG A100, single-MIG H200).
"""

#: two tainted 8-GPU H100 nodes, sized like p5.48xlarge
H100_POOL = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 2
  gpu: {model: H100-80GB, count: 8}
  cpu: "96"
  memory: 1024Gi
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
"""

#: what a pod needs to land on H100_POOL
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

#: one T4 shared four ways by the device plugin's time-slicing
T4_TIME_SLICED = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: t4}
spec:
  count: 1
  gpu: {model: T4, count: 1}
  cpu: "{cpu}"
  memory: {memory}
  devicePlugin:
    version: v1
    sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}
"""

#: two A100s cut by mig-parted's all-balanced, advertised with the mixed strategy
A100_MIXED_MIG = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec:
  count: 1
  gpu: {model: A100-40GB, count: 2}
  cpu: "{cpu}"
  memory: {memory}
  devicePlugin: {version: v1, flags: {migStrategy: mixed}}
  mig: {config: all-balanced}
"""


def sized(pool: str, cpu: str, memory: str) -> str:
    """``pool`` (one of the templates above) with the node size filled in."""
    return pool.replace("{cpu}", cpu).replace("{memory}", memory)


__all__ = ["A100_MIXED_MIG", "H100_POOL", "T4_TIME_SLICED", "TOLERATE", "sized"]
