"""Each component's command line, and the kubeconfigs the components read.

Everything listens on 127.0.0.1 with TLS from the lab's private CA and authenticates
clients by certificate, as kubeadm sets a control plane up; the flags differ from
kubeadm's only where a lab on one machine needs it (said beside each).
"""

from __future__ import annotations

import os

from gpu_lab.errors import LocalClusterError

from ...kube import kubeconfig as kc
from .certs import SERVICE_CIDR
from .components import APISERVER, CONTROLLER_MANAGER, ETCD, HOST, SCHEDULER
from .labdir import LabDir

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: The native Workload API and gang scheduling (KEP-4671), beta and off by default in
#: v1.37: the GenericWorkload gate serves Workload and PodGroup (scheduling.k8s.io/v1beta1,
#: a beta group the API server only serves when asked), admits pod spec.schedulingGroup,
#: adds GangScheduling to kube-scheduler's default profile and lets the controller-manager
#: remove PodGroups' protection finalizer. It changes nothing for pods without a
#: spec.schedulingGroup, so every lab has it.
FEATURE_GATES = "GenericWorkload=true"
#: raise klog's verbosity for two files alone, not the whole scheduler: schedule_one.go's
#: score lines and batch.go's opportunistic-batching node hints
SCORE_LOG_VMODULE = "--vmodule=schedule_one=10,batch=3"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"


def env() -> dict[str, str]:
    """The environment components run in: this one without what would redirect them."""
    out = dict(os.environ)
    for k in ("KUBECONFIG", "ETCDCTL_API", "ETCDCTL_ENDPOINTS", "ETCD_DATA_DIR"):
        out.pop(k, None)
    # etcd reads every ETCD_* variable as a flag
    return {k: v for k, v in out.items() if not k.startswith("ETCD_")}


def write_kubeconfigs(lab: LabDir, state: dict) -> None:
    """The admin kubeconfig, and the scheduler's and controller-manager's own."""
    pki = lab.pki
    server = f"https://{HOST}:{state['ports'][APISERVER]}"
    cluster = f"gpu-lab-{lab.name}"
    lab.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    kc.write(
        lab.kubeconfig(),
        kc.render(
            server,
            pki.ca_crt,
            pki.crt("admin"),
            pki.key("admin"),
            user=f"admin@{cluster}",
            cluster=cluster,
            context=cluster,
        ),
    )
    for c in (SCHEDULER, CONTROLLER_MANAGER):
        kc.write(
            lab.config_dir / f"{c}.kubeconfig",
            kc.render(
                server, pki.ca_crt, pki.crt(c), pki.key(c), user=f"system:{c}", cluster=cluster
            ),
        )


def argv(lab: LabDir, component: str, state: dict) -> list[str]:
    """The command line that starts ``component`` of ``lab`` (binaries and ports from
    ``state``)."""
    b = str(state["binaries"][component])
    p = state["ports"]
    pki = lab.pki
    cfg = lab.config_dir
    if component == ETCD:
        client = f"https://{HOST}:{p['etcd']}"
        peer = f"https://{HOST}:{p['etcd-peer']}"
        return [
            b,
            "--name=gpu-lab",
            f"--data-dir={lab.etcd_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=gpu-lab={peer}",
            f"--cert-file={pki.crt('etcd-server')}",
            f"--key-file={pki.key('etcd-server')}",
            f"--trusted-ca-file={pki.ca_crt}",
            "--client-cert-auth=true",
            f"--peer-cert-file={pki.crt('etcd-server')}",
            f"--peer-key-file={pki.key('etcd-server')}",
            f"--peer-trusted-ca-file={pki.ca_crt}",
            "--peer-client-cert-auth=true",
            "--unsafe-no-fsync=true",
            "--snapshot-count=10000",
            "--log-level=warn",
        ]
    if component == APISERVER:
        return [
            b,
            f"--etcd-servers=https://{HOST}:{p['etcd']}",
            f"--etcd-cafile={pki.ca_crt}",
            f"--etcd-certfile={pki.crt('apiserver-etcd-client')}",
            f"--etcd-keyfile={pki.key('apiserver-etcd-client')}",
            f"--bind-address={HOST}",
            f"--advertise-address={HOST}",
            f"--secure-port={p[APISERVER]}",
            f"--tls-cert-file={pki.crt('apiserver')}",
            f"--tls-private-key-file={pki.key('apiserver')}",
            f"--client-ca-file={pki.ca_crt}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            # request-header authentication (what aggregated API servers and the
            # scheduler's and controller-manager's delegated authn read from the
            # extension-apiserver-authentication ConfigMap); a CA of its own
            f"--requestheader-client-ca-file={pki.front_proxy_ca_crt}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.crt('front-proxy-client')}",
            f"--proxy-client-key-file={pki.key('front-proxy-client')}",
            # the kubernetes Service's endpoint would be 127.0.0.1, which Endpoints
            # validation forbids: nothing in-cluster dials it (no pods run)
            "--endpoint-reconciler-type=none",
            f"--feature-gates={FEATURE_GATES}",
            f"--runtime-config={RUNTIME_CONFIG}",
        ]
    common = [
        f"--bind-address={HOST}",
        f"--secure-port={p[component]}",
        f"--tls-cert-file={pki.crt(component + '-serving')}",
        f"--tls-private-key-file={pki.key(component + '-serving')}",
        f"--authentication-kubeconfig={cfg / (component + '.kubeconfig')}",
        f"--authorization-kubeconfig={cfg / (component + '.kubeconfig')}",
        f"--feature-gates={FEATURE_GATES}",
    ]
    if component == CONTROLLER_MANAGER:
        return [
            b,
            f"--kubeconfig={cfg / (component + '.kubeconfig')}",
            *common,
            "--leader-elect=false",
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_crt}",
            f"--cluster-signing-cert-file={pki.ca_crt}",
            f"--cluster-signing-key-file={pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cluster-name=gpu-lab-{lab.name}",
            # else it creates /usr/libexec/kubernetes/kubelet-plugins/... (as root)
            f"--flex-volume-plugin-dir={lab.dir / 'volume-plugins'}",
        ]
    if component == SCHEDULER:
        # schedule_one.go logs each score plugin's weighted score per node at V(10):
        # explain reads the real scheduler's own arithmetic from there (schedulerlog.py)
        return [b, f"--config={cfg / 'kube-scheduler.yaml'}", *common, SCORE_LOG_VMODULE]
    raise LocalClusterError(f"unknown component {component!r}")


__all__ = [
    "FEATURE_GATES",
    "RUNTIME_CONFIG",
    "SCORE_LOG_VMODULE",
    "SERVICE_ACCOUNT_ISSUER",
    "argv",
    "env",
    "write_kubeconfigs",
]
