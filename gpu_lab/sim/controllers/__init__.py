"""The controllers of the embedded cluster, each named after the real one it models.

``job.JobController`` (kube-controller-manager's job controller),
``replicaset.ReplicaSetController``, ``statefulset.StatefulSetController`` and
``daemonset.DaemonSetController`` create and replace their workloads' pods on the
simulated clock. They talk to the cluster only through ``base.Cluster``.
"""
