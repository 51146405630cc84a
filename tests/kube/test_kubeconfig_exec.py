"""Exec credential plugins in kubeconfigs (how EKS, GKE and AKS authenticate).

The plugin is a stub script written to ``tmp_path``: it logs what it was given
(``KUBERNETES_EXEC_INFO``, args, env) and prints the next of a list of prepared answers.
Most tests need no cluster: the kubeconfig's validation, the run, the cache and its expiry,
the error lines, and the client's 401 retry (against a fake transport). The last group
authenticates against the REAL local control plane with a ServiceAccount token minted by
the TokenRequest API and handed out by the stub plugin, and with a client certificate; it
skips without the control-plane binaries, unless ``CI=true``: then it fails.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import urllib3
import yaml
from cryptography.hazmat.primitives import serialization
from realcluster import require_controlplane

import gpu_lab
from gpu_lab.backends.kubeconfig.connect import open_client
from gpu_lab.backends.local.certs import make_ca
from gpu_lab.errors import ExecCredentialError, GpuLabError
from gpu_lab.kube import ApiError, KubeClient
from gpu_lab.kube import kubeconfig as kc
from gpu_lab.kube.execcredential import ExecConfig, ExecPlugin, parse_config

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

# =========================================================================== the stub plugin

STUB = """\
#!{python}
# A stand-in credential plugin: logs its input, prints the next prepared answer.
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"info": os.environ.get("KUBERNETES_EXEC_INFO"), "argv": sys.argv[1:],
                        "env": os.environ.get("STUB_ENV"), "stdin_tty": sys.stdin.isatty()}}) + "\\n")
answers = json.load(open(os.path.join(here, "answers.json")))
n = sum(1 for _ in open(os.path.join(here, "calls.jsonl")))
a = answers[min(n, len(answers)) - 1]
time.sleep(a.get("sleep", 0))
out = a.get("stdout", "")
sys.stdout.write(out if isinstance(out, str) else json.dumps(out))
sys.stderr.write(a.get("stderr", ""))
sys.exit(a.get("exit", 0))
"""


class Stub:
    """A plugin script in its own folder, with its answers and a log of its calls."""

    def __init__(self, folder: Path, answers: list[dict]):
        folder.mkdir(parents=True, exist_ok=True)
        self.dir = folder
        self.path = folder / "plugin"
        self.path.write_text(STUB.format(python=sys.executable))
        self.path.chmod(0o755)
        self.answer(answers)

    def answer(self, answers: list[dict]) -> None:
        (self.dir / "answers.json").write_text(json.dumps(answers))

    @property
    def calls(self) -> list[dict]:
        log = self.dir / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def cred(api_version: str = V1, **status) -> dict:
    return {"stdout": {"apiVersion": api_version, "kind": "ExecCredential", "status": status}}


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_kubeconfig(
    folder: Path,
    exec_: dict | None = None,
    *,
    server: str = "https://127.0.0.1:6443",
    cluster_extra: dict | None = None,
    user_extra: dict | None = None,
) -> Path:
    user: dict = dict(user_extra or {})
    if exec_ is not None:
        user["exec"] = exec_
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster_extra or {})}}],
        "users": [{"name": "alice", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "alice"}}],
        "current-context": "ctx",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def exec_of(stub: Stub, **extra) -> dict:
    return {"apiVersion": V1, "command": str(stub.path), "interactiveMode": "Never", **extra}


def plugin(stub: Stub, now: list[float] | None = None, **extra) -> ExecPlugin:
    cfg = parse_config(exec_of(stub, **extra), "alice", stub.dir)
    clock = (lambda: now[0]) if now is not None else None
    return ExecPlugin(cfg, {"server": "https://x"}, **({"clock": clock} if clock else {}))


def one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


# =========================================================================== the exec stanza


@pytest.mark.parametrize(
    "stanza, want",
    [
        (
            {"apiVersion": V1, "command": "aws"},
            "invalid configuration: interactiveMode must be specified for alice to use exec "
            "authentication plugin",
        ),
        (
            {"interactiveMode": "Never"},
            "invalid configuration: [command must be specified for alice to use exec "
            "authentication plugin, apiVersion must be specified for alice to use exec "
            "authentication plugin]",
        ),
        (
            {"apiVersion": V1, "command": "aws", "interactiveMode": "Sometimes"},
            'invalid configuration: invalid interactiveMode for alice: "Sometimes"',
        ),
        (
            {"apiVersion": V1, "command": "aws", "interactiveMode": "Never", "env": [{"value": "1"}]},
            "invalid configuration: env variable name must be specified for alice to use exec "
            "authentication plugin",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "aws"},
            'exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"',
        ),
    ],
)
def test_a_bad_exec_stanza_is_one_line_in_kubectls_words(tmp_path, stanza, want):
    path = write_kubeconfig(tmp_path, stanza)
    with pytest.raises(ExecCredentialError) as exc:
        kc.load(path)
    assert one_line(exc) == f"{path}: {want}"


def test_interactive_mode_always_is_refused_as_gpu_lab_has_no_terminal(tmp_path):
    path = write_kubeconfig(
        tmp_path, {"apiVersion": V1, "command": "kubelogin", "interactiveMode": "Always"}
    )
    with pytest.raises(ExecCredentialError) as exc:
        open_client(path)
    msg = one_line(exc)
    assert msg.startswith(f"{path}: exec plugin cannot support interactive mode")
    assert "interactiveMode: Always" in msg and "IfAvailable or Never" in msg


def test_v1beta1_defaults_interactive_mode_and_v1_takes_never_or_if_available(tmp_path):
    assert parse_config({"apiVersion": V1BETA1, "command": "aws"}, "u", tmp_path).interactive_mode \
        == "IfAvailable"
    for mode in ("Never", "IfAvailable"):
        cfg = parse_config({"apiVersion": V1, "command": "aws", "interactiveMode": mode}, "u", tmp_path)
        assert cfg.interactive_mode == mode


def test_command_with_a_slash_is_relative_to_the_kubeconfig_and_a_bare_name_uses_path(tmp_path):
    rel = parse_config(
        {"apiVersion": V1, "command": "./bin/get-token", "interactiveMode": "Never"}, "u", tmp_path
    )
    assert rel.command == str((tmp_path / "bin" / "get-token").resolve())
    bare = parse_config({"apiVersion": V1, "command": "aws", "interactiveMode": "Never"}, "u", tmp_path)
    assert bare.command == "aws"


def test_the_stanzas_fields_are_read(tmp_path):
    cfg = parse_config(
        {
            "apiVersion": V1,
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", "gpu"],
            "env": [{"name": "AWS_PROFILE", "value": "ml"}],
            "installHint": "Install the AWS CLI:\n  https://aws.amazon.com/cli/",
            "provideClusterInfo": True,
            "interactiveMode": "IfAvailable",
        },
        "alice",
        tmp_path,
    )
    assert cfg == ExecConfig(
        user="alice",
        command="aws",
        api_version=V1,
        args=("eks", "get-token", "--cluster-name", "gpu"),
        env=(("AWS_PROFILE", "ml"),),
        install_hint="Install the AWS CLI: https://aws.amazon.com/cli/",
        provide_cluster_info=True,
        interactive_mode="IfAvailable",
    )


# =========================================================================== running the plugin


def test_the_plugin_gets_the_exec_credential_request_args_and_env(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="t-1")])
    p = plugin(stub, args=["get-token", "--cluster", "gpu"], env=[{"name": "STUB_ENV", "value": "x"}])
    assert p.credential().token == "t-1"
    (call,) = stub.calls
    assert call["argv"] == ["get-token", "--cluster", "gpu"] and call["env"] == "x"
    assert call["stdin_tty"] is False
    # no provideClusterInfo: no spec.cluster
    assert json.loads(call["info"]) == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {"interactive": False},
    }


def test_provide_cluster_info_sends_the_cluster_with_ca_bytes_and_its_exec_extension(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="t")])
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n")
    path = write_kubeconfig(
        tmp_path,
        exec_of(stub, provideClusterInfo=True),
        cluster_extra={
            "certificate-authority": "ca.crt",  # relative to the kubeconfig
            "tls-server-name": "api.internal",
            "extensions": [
                {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "gpu"}}
            ],
        },
    )
    kc.load(path).exec.credential()
    info = json.loads(stub.calls[0]["info"])
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "tls-server-name": "api.internal",
        "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
        "config": {"audience": "gpu"},
    }


@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_both_api_versions_answer_with_a_token(tmp_path, version):
    stub = Stub(tmp_path / "p", [cred(version, token="tok")])
    p = plugin(stub, apiVersion=version)
    assert p.credential().token == "tok"
    assert json.loads(stub.calls[0]["info"])["apiVersion"] == version


def _pem_pair():
    cert, key = make_ca("exec-user")
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return cert_pem, key_pem


def test_a_client_certificate_answer_becomes_private_files(tmp_path):
    cert_pem, key_pem = _pem_pair()
    stub = Stub(tmp_path / "p", [cred(clientCertificateData=cert_pem, clientKeyData=key_pem)])
    got = plugin(stub).credential()
    assert got.token is None
    assert Path(got.cert_file).read_text() == cert_pem
    assert Path(got.key_file).read_text() == key_pem
    assert stat.S_IMODE(os.stat(got.key_file).st_mode) == 0o600


# =========================================================================== the cache


def test_the_answer_is_cached_until_its_expiration_timestamp(tmp_path):
    now = [1_800_000_000.0]
    stub = Stub(
        tmp_path / "p",
        [
            cred(token="first", expirationTimestamp=rfc3339(now[0] + 60)),
            cred(token="second"),
        ],
    )
    p = plugin(stub, now)
    assert p.credential().token == "first"
    now[0] += 59
    assert p.credential().token == "first" and p.runs == 1
    now[0] += 2  # past expirationTimestamp: run again
    assert p.credential().token == "second" and p.runs == 2
    now[0] += 10 * 86400  # no expirationTimestamp: kept for the process (or until a 401)
    assert p.credential().token == "second" and p.runs == 2


def test_a_401_runs_the_plugin_again_once_unless_another_request_already_did(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="old"), cred(token="new"), cred(token="newer")])
    p = plugin(stub)
    old = p.credential()
    new = p.refresh(old)
    assert new.token == "new" and p.runs == 2
    # a second request that also saw "old" rejected takes "new" without running the plugin
    assert p.refresh(old) is new and p.runs == 2


def test_every_client_of_the_same_kubeconfig_user_shares_one_plugin(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="shared")])
    path = write_kubeconfig(tmp_path, exec_of(stub))
    a, b = KubeClient.from_kubeconfig(path), KubeClient.from_kubeconfig(path)
    assert a.creds.exec is b.creds.exec
    assert a.creds.exec.credential().token == b.creds.exec.credential().token == "shared"
    assert len(stub.calls) == 1


def test_a_static_token_wins_over_exec_as_in_client_go(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="from-plugin")])
    creds = kc.load(write_kubeconfig(tmp_path, exec_of(stub), user_extra={"token": "static"}))
    assert creds.token == "static" and creds.exec is None


# =========================================================================== error lines


@pytest.mark.parametrize(
    "answer, want",
    [
        (
            {"exit": 3, "stderr": "An error occurred (ExpiredToken)\nrun: aws sso login\n"},
            "exec: executable {cmd} failed with exit code 3: An error occurred (ExpiredToken); "
            "run: aws sso login",
        ),
        ({"exit": 1}, "exec: executable {cmd} failed with exit code 1"),
        ({"stdout": "Please log in"}, "decoding stdout: couldn't get version/kind; json parse error"),
        (
            cred(V1BETA1, token="t"),
            f"exec plugin is configured to use API version {V1}, plugin returned version "
            f"{V1BETA1}",
        ),
        ({"stdout": {"apiVersion": V1, "kind": "ExecCredential"}},
         "exec plugin didn't return a status field"),
        (cred(), "exec plugin didn't return a token or cert/key pair"),
        (cred(clientCertificateData="x"), "exec plugin returned only certificate or key, not both"),
        (
            cred(clientCertificateData="not a pem", clientKeyData="nor this"),
            "failed parsing client key/certificate",
        ),
        (cred(token="t", expirationTimestamp="tomorrow"), 'parsing time "tomorrow" as RFC 3339'),
    ],
)
def test_a_failing_plugin_is_one_line_in_client_gos_words(tmp_path, answer, want):
    stub = Stub(tmp_path / "p", [answer])
    with pytest.raises(ExecCredentialError) as exc:
        plugin(stub).credential()
    msg = one_line(exc)
    assert msg.startswith("getting credentials: ")
    assert want.format(cmd=stub.path) in msg


def test_a_missing_command_names_its_install_hint(tmp_path):
    path = write_kubeconfig(
        tmp_path,
        {
            "apiVersion": V1,
            "command": "gpu-lab-no-such-plugin",
            "interactiveMode": "Never",
            "installHint": "gke-gcloud-auth-plugin is needed:\n  gcloud components install "
            "gke-gcloud-auth-plugin",
        },
    )
    client = open_client(path)  # nothing runs until the first request
    with pytest.raises(ExecCredentialError) as exc:
        client.server_version()
    msg = one_line(exc)
    assert msg.startswith("getting credentials: exec: executable gpu-lab-no-such-plugin not found")
    assert msg.endswith(
        "gke-gcloud-auth-plugin is needed: gcloud components install gke-gcloud-auth-plugin"
    )


def test_a_plugin_that_cannot_run_or_hangs_is_one_line(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    p = ExecPlugin(parse_config(exec_of(Stub(tmp_path / "s", [])) | {"command": str(script)},
                                "alice", tmp_path))
    with pytest.raises(ExecCredentialError, match="permission denied"):
        p.credential()
    slow = Stub(tmp_path / "slow", [{"sleep": 5, **cred(token="late")}])
    p = ExecPlugin(parse_config(exec_of(slow), "alice", tmp_path), timeout=0.5)
    with pytest.raises(ExecCredentialError) as exc:
        p.credential()
    assert one_line(exc) == f"getting credentials: exec: executable {slow.path} did not finish in 0.5 s"


# =========================================================================== other credentials


@pytest.mark.parametrize(
    "provider, names",
    [("oidc", "kubelogin"), ("gcp", "gke-gcloud-auth-plugin"), ("azure", "kubelogin")],
)
def test_auth_providers_are_refused_naming_the_exec_plugin_to_use(tmp_path, provider, names):
    path = write_kubeconfig(
        tmp_path, user_extra={"auth-provider": {"name": provider, "config": {"id-token": "x"}}}
    )
    with pytest.raises(GpuLabError) as exc:
        open_client(path)
    msg = one_line(exc)
    assert f"the '{provider}' auth-provider" in msg and "exec credential plugin" in msg
    assert names in msg


def test_exec_and_auth_provider_together_is_kubectls_configuration_error(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="t")])
    path = write_kubeconfig(tmp_path, exec_of(stub), user_extra={"auth-provider": {"name": "oidc"}})
    with pytest.raises(GpuLabError) as exc:
        kc.load(path)
    assert one_line(exc).endswith(
        "authProvider cannot be provided in combination with an exec plugin for alice"
    )


def test_basic_auth_is_refused_and_an_unreadable_token_file_says_so(tmp_path):
    path = write_kubeconfig(tmp_path, user_extra={"username": "admin", "password": "pw"})
    with pytest.raises(GpuLabError, match="basic authentication"):
        kc.load(path)
    path = write_kubeconfig(tmp_path, user_extra={"tokenFile": "missing-token"})
    with pytest.raises(GpuLabError) as exc:
        kc.load(path)
    assert f"cannot read tokenFile {tmp_path / 'missing-token'}" in one_line(exc)


def test_token_and_token_file_are_sent_as_bearer_tokens(tmp_path):
    (tmp_path / "sa-token").write_text("from-file\n")
    assert kc.load(write_kubeconfig(tmp_path, user_extra={"tokenFile": "sa-token"})).token == \
        "from-file"
    client = KubeClient.from_kubeconfig(write_kubeconfig(tmp_path, user_extra={"token": "abc"}))
    assert client.configuration.auth_settings()["BearerToken"]["value"] == "Bearer abc"


def test_in_cluster_reads_the_pods_service_account_and_outside_a_pod_says_so(tmp_path, monkeypatch):
    from kubernetes.config import incluster_config

    from gpu_lab.kube import KubeconfigError

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeconfigError) as exc:
        KubeClient.in_cluster()
    assert one_line(exc).startswith("not running in a pod with a ServiceAccount")
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    creds = kc.in_cluster()
    assert (creds.server, creds.token, creds.ca_file) == (
        "https://10.96.0.1:443", "sa-token", str(tmp_path / "ca.crt"))
    # the package's hook re-reads the token file (the kubelet rotates it) for every client
    assert creds.refresh is not None
    assert KubeClient(creds).configuration.refresh_api_key_hook is creds.refresh


# =========================================================================== the client


class FakeTransport:
    """Stands in for the package's ``ApiClient.call_api``: answers 401 to any token in
    ``bad``; records each request's token and the client certificate it went with."""

    def __init__(self, client: KubeClient, bad: set[str]):
        self.client, self.bad = client, bad
        self.seen: list[tuple[str | None, object]] = []
        client.api.call_api = self

    def __call__(self, method, url, headers=None, body=None, **kw):
        auth = (headers or {}).get("authorization")
        self.seen.append((auth, self.client.configuration.cert_file))
        if auth and auth.removeprefix("Bearer ") in self.bad:
            status = {"kind": "Status", "code": 401, "reason": "Unauthorized",
                      "message": "Unauthorized"}
            resp = urllib3.HTTPResponse(json.dumps(status).encode(), status=401,
                                        reason="Unauthorized")
        else:
            resp = urllib3.HTTPResponse(b'{"major": "1", "minor": "37"}', status=200)
        return SimpleNamespace(response=resp)


def test_the_client_sends_the_plugins_token_and_retries_a_401_once(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="revoked"), cred(token="fresh")])
    client = KubeClient.from_kubeconfig(write_kubeconfig(tmp_path, exec_of(stub)))
    transport = FakeTransport(client, bad={"revoked"})
    assert client.server_version()["minor"] == "37"
    assert [auth for auth, _ in transport.seen] == ["Bearer revoked", "Bearer fresh"]
    assert client.server_version() and len(stub.calls) == 2  # cached since


def test_a_401_after_the_rerun_is_the_api_servers_unauthorized(tmp_path):
    stub = Stub(tmp_path / "p", [cred(token="bad")])
    client = KubeClient.from_kubeconfig(write_kubeconfig(tmp_path, exec_of(stub)))
    transport = FakeTransport(client, bad={"bad"})
    with pytest.raises(ApiError) as exc:
        client.server_version()
    assert exc.value.code == 401 and str(exc.value) == "Unauthorized"
    assert len(transport.seen) == 2 and len(stub.calls) == 2  # one retry, no loop


def test_the_client_presents_the_plugins_certificate(tmp_path):
    cert_pem, key_pem = _pem_pair()
    stub = Stub(tmp_path / "p", [cred(clientCertificateData=cert_pem, clientKeyData=key_pem)])
    client = KubeClient.from_kubeconfig(write_kubeconfig(tmp_path, exec_of(stub)))
    transport = FakeTransport(client, bad=set())
    client.server_version()
    ((auth, cert),) = transport.seen
    assert auth is None and Path(cert).read_text() == cert_pem


# =========================================================================== real control plane


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A fresh control plane with one Node, a ServiceAccount that may read nodes and pods,
    and a token for it from the TokenRequest API."""
    require_controlplane("the exec credential tests")
    from gpu_lab.backends.local.cluster import LocalCluster

    lab = LocalCluster(f"ex-{uuid.uuid4().hex[:8]}", root=tmp_path_factory.mktemp("ex-home"))
    try:
        lab.up(progress=None)
        admin = lab.client()
        admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"}})
        admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": "reader", "namespace": "default"}})
        rbac = "rbac.authorization.k8s.io/v1"
        admin.create({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "reader"},
                      "rules": [{"apiGroups": [""], "resources": ["nodes", "pods"],
                                 "verbs": ["get", "list", "watch"]}]})
        admin.create({"apiVersion": rbac, "kind": "ClusterRoleBinding",
                      "metadata": {"name": "reader"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "reader"},
                      "subjects": [{"kind": "ServiceAccount", "name": "reader",
                                    "namespace": "default"}]})
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600}}
        doc = admin.request("POST", "/api/v1/namespaces/default/serviceaccounts/reader/token",
                            body=body).json()
        lab.sa_token = doc["status"]["token"]
        lab.sa_expires = doc["status"]["expirationTimestamp"]
        yield lab
    finally:
        lab.down(progress=None, purge=True)


def _exec_kubeconfig(lab, folder: Path, stub: Stub, api_version: str = V1) -> Path:
    """The lab's server and CA, and a user whose credential comes from ``stub``."""
    return write_kubeconfig(
        folder,
        {"apiVersion": api_version, "command": str(stub.path), "interactiveMode": "IfAvailable",
         "provideClusterInfo": True},
        server=kc.load(lab.kubeconfig()).server,
        cluster_extra={"certificate-authority": str(lab.pki.ca_crt)},
    )


def _whoami(client: KubeClient) -> str:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    doc = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                         body=review).json()
    return doc["status"]["userInfo"]["username"]


@pytest.mark.controlplane
def test_connect_with_an_exec_kubeconfig_reads_nodes_as_the_service_account(cluster, tmp_path):
    stub = Stub(tmp_path / "p", [cred(token=cluster.sa_token,
                                      expirationTimestamp=cluster.sa_expires)])
    path = _exec_kubeconfig(cluster, tmp_path, stub)
    with gpu_lab.connect("kubeconfig", kubeconfig=path) as lab:
        assert list(lab.nodes()["name"]) == ["gpu-0"]
        assert _whoami(lab.client) == "system:serviceaccount:default:reader"
        # RBAC applies to the plugin's identity: secrets were not granted
        with pytest.raises(ApiError) as exc:
            lab.client.list("Secret", namespace="default")
        assert exc.value.code == 403 and "system:serviceaccount:default:reader" in str(exc.value)
    # one run for all those requests; it was told which cluster it was for
    assert len(stub.calls) == 1
    spec = json.loads(stub.calls[0]["info"])["spec"]
    assert spec["cluster"]["server"] == kc.load(cluster.kubeconfig()).server
    assert base64.b64decode(spec["cluster"]["certificate-authority-data"]) == \
        cluster.pki.ca_crt.read_bytes()


@pytest.mark.controlplane
def test_a_rejected_token_runs_the_plugin_again_against_the_real_server(cluster, tmp_path):
    stub = Stub(tmp_path / "p", [cred(V1BETA1, token="revoked-or-rotated"),
                                 cred(V1BETA1, token=cluster.sa_token)])
    client = open_client(_exec_kubeconfig(cluster, tmp_path, stub, V1BETA1))
    assert [n["metadata"]["name"] for n in client.list("Node")["items"]] == ["gpu-0"]
    assert len(stub.calls) == 2


@pytest.mark.controlplane
def test_a_client_certificate_from_the_plugin_authenticates(cluster, tmp_path):
    pki = cluster.pki
    stub = Stub(tmp_path / "p", [cred(clientCertificateData=pki.crt("admin").read_text(),
                                      clientKeyData=pki.key("admin").read_text())])
    client = open_client(_exec_kubeconfig(cluster, tmp_path, stub))
    assert _whoami(client) == "gpu-lab-admin"  # the certificate's CN
    assert client.get("Node", "gpu-0")["metadata"]["name"] == "gpu-0"

