"""A private CA and the certificates a local control plane needs, made with ``cryptography``.

Everything goes into one directory (the lab's ``pki/``), every file mode 0600::

    ca.crt ca.key                         the cluster CA (also signs CSRs in the controller-manager)
    front-proxy-ca.crt/.key               a second CA, only for the request-header (aggregation)
                                          client, as kubeadm keeps it apart from the cluster CA
    front-proxy-client.crt/.key           CN=front-proxy-client, signed by front-proxy-ca
    apiserver.crt/.key                    serving: 127.0.0.1, localhost, kubernetes[.default[.svc...]], 10.96.0.1
    etcd-server.crt/.key                  etcd serving and peer: 127.0.0.1, localhost
    apiserver-etcd-client.crt/.key        kube-apiserver -> etcd
    admin.crt/.key                        CN=gpu-lab-admin, O=system:masters (cluster-admin)
    kube-scheduler.crt/.key               CN=system:kube-scheduler
    kube-controller-manager.crt/.key      CN=system:kube-controller-manager
    kube-scheduler-serving.crt/.key       serving for the scheduler's /healthz (127.0.0.1, localhost)
    kube-controller-manager-serving.crt/.key
    sa.key sa.pub                         service-account token signing key pair (RSA 2048)

:func:`ensure_pki` is idempotent: a file that exists, parses, is signed by the current CA,
is valid for at least another day and names the wanted subject and SANs is kept; anything
else is (re)made. A new CA remakes every leaf it signs. TLS keys are ECDSA P-256 (fast to make);
the service-account key is RSA as kubeadm makes it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: ClusterIP of the ``kubernetes`` Service: the first address of ``--service-cluster-ip-range``
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"

CA_DAYS = 3650
LEAF_DAYS = 365
#: leaves closer than this to expiry are remade
RENEW_BEFORE = dt.timedelta(days=1)

APISERVER_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
)
LOOPBACK_DNS = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)

_SERVER = (ExtendedKeyUsageOID.SERVER_AUTH,)
_CLIENT = (ExtendedKeyUsageOID.CLIENT_AUTH,)
_BOTH = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)


@dataclass(frozen=True)
class LeafSpec:
    """One certificate signed by the CA."""

    name: str  # file stem: <name>.crt / <name>.key
    cn: str
    orgs: tuple[str, ...] = ()
    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    usages: tuple = field(default=_CLIENT)
    ca: str = "ca"  # file stem of the signing CA


CAS = ("ca", "front-proxy-ca")
FRONT_PROXY_CLIENT = "front-proxy-client"

LEAVES: tuple[LeafSpec, ...] = (
    LeafSpec(
        "apiserver",
        "kube-apiserver",
        dns=APISERVER_DNS,
        ips=(*LOOPBACK_IPS, KUBERNETES_SERVICE_IP),
        usages=_SERVER,
    ),
    # etcd's peer listener uses the same pair, hence both usages
    LeafSpec("etcd-server", "etcd", dns=LOOPBACK_DNS, ips=LOOPBACK_IPS, usages=_BOTH),
    LeafSpec("apiserver-etcd-client", "kube-apiserver-etcd-client"),
    LeafSpec("admin", "gpu-lab-admin", orgs=("system:masters",)),
    LeafSpec("kube-scheduler", "system:kube-scheduler"),
    LeafSpec("kube-controller-manager", "system:kube-controller-manager"),
    LeafSpec(
        "kube-scheduler-serving",
        "kube-scheduler",
        dns=LOOPBACK_DNS,
        ips=LOOPBACK_IPS,
        usages=_SERVER,
    ),
    LeafSpec(
        "kube-controller-manager-serving",
        "kube-controller-manager",
        dns=LOOPBACK_DNS,
        ips=LOOPBACK_IPS,
        usages=_SERVER,
    ),
    LeafSpec(FRONT_PROXY_CLIENT, FRONT_PROXY_CLIENT, ca="front-proxy-ca"),
)


@dataclass(frozen=True)
class Pki:
    """Paths of everything :func:`ensure_pki` made."""

    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def front_proxy_ca_crt(self) -> Path:
        return self.dir / "front-proxy-ca.crt"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def crt(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"


# --------------------------------------------------------------------------- files


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte (atomic rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)  # O_CREAT's mode is masked by the umask; be explicit
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _load_cert(path: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def _load_key(path: Path):
    try:
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None


# --------------------------------------------------------------------------- building


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _name(cn: str, orgs: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _new_tls_key():
    return ec.generate_private_key(ec.SECP256R1())


def _builder(subject: x509.Name, issuer: x509.Name, key, days: int, ca: bool) -> x509.CertificateBuilder:
    """What the CA and the leaf certificates share: names, validity (from five minutes
    ago, for clock skew), the CA flag and the key usages that go with it."""
    now = _now()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def make_ca(cn: str = "gpu-lab-ca", days: int = CA_DAYS):
    """A self-signed CA certificate and its key."""
    key = _new_tls_key()
    name = _name(cn)
    cert = (
        _builder(name, name, key, days, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_leaf(spec: LeafSpec, ca_cert: x509.Certificate, ca_key, days: int = LEAF_DAYS):
    """A certificate for ``spec`` signed by the CA, and its new key."""
    key = _new_tls_key()
    builder = (
        _builder(_name(spec.cn, spec.orgs), ca_cert.subject, key, days, ca=False)
        .add_extension(x509.ExtendedKeyUsage(list(spec.usages)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in spec.dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in spec.ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


# --------------------------------------------------------------------------- inspection


def sans_of(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    """(DNS names, IP addresses as strings) in the certificate's SAN extension."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    dns = set(ext.get_values_for_type(x509.DNSName))
    ips = {str(i) for i in ext.get_values_for_type(x509.IPAddress)}
    return dns, ips


def _attrs(cert: x509.Certificate, oid) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def _signed_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _fresh(cert: x509.Certificate) -> bool:
    now = _now()
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - now > RENEW_BEFORE


def _key_matches(cert: x509.Certificate, key) -> bool:
    if key is None:
        return False
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return cert.public_key().public_bytes(enc, pub) == key.public_key().public_bytes(enc, pub)


def leaf_ok(spec: LeafSpec, cert: x509.Certificate | None, key, ca_cert) -> bool:
    """Whether an existing pair can be kept for ``spec``."""
    if cert is None or not _key_matches(cert, key) or not _fresh(cert):
        return False
    if not _signed_by(cert, ca_cert):
        return False
    if _attrs(cert, NameOID.COMMON_NAME) != [spec.cn]:
        return False
    if sorted(_attrs(cert, NameOID.ORGANIZATION_NAME)) != sorted(spec.orgs):
        return False
    return sans_of(cert) == (set(spec.dns), set(spec.ips))


# --------------------------------------------------------------------------- entry point


def ensure_pki(directory: Path | str, leaves: Iterable[LeafSpec] = LEAVES) -> Pki:
    """Make (or keep) the CA, every leaf in ``leaves`` and the service-account key pair
    in ``directory`` (mode 0700, files 0600). Returns their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(d, 0o700)
    pki = Pki(d)

    cas = {}
    for ca_name in CAS:
        crt_path, key_path = pki.crt(ca_name), pki.key(ca_name)
        ca_cert, ca_key = _load_cert(crt_path), _load_key(key_path)
        ca_valid = (
            ca_cert is not None
            and _key_matches(ca_cert, ca_key)
            and _fresh(ca_cert)
            and _signed_by(ca_cert, ca_cert)
            and _attrs(ca_cert, NameOID.COMMON_NAME) == [f"gpu-lab-{ca_name}"]
        )
        if not ca_valid:
            ca_cert, ca_key = make_ca(f"gpu-lab-{ca_name}")
            _write_private(key_path, _key_pem(ca_key))
            _write_private(crt_path, ca_cert.public_bytes(serialization.Encoding.PEM))
        assert ca_cert is not None  # valid (so loaded), or made just now
        cas[ca_name] = (ca_cert, ca_key)

    for spec in leaves:
        ca_cert, ca_key = cas[spec.ca]
        crt_path, key_path = pki.crt(spec.name), pki.key(spec.name)
        if leaf_ok(spec, _load_cert(crt_path), _load_key(key_path), ca_cert):
            continue
        cert, key = make_leaf(spec, ca_cert, ca_key)
        _write_private(key_path, _key_pem(key))
        _write_private(crt_path, cert.public_bytes(serialization.Encoding.PEM))

    sa = _load_key(pki.sa_key)
    if not isinstance(sa, rsa.RSAPrivateKey) or not pki.sa_pub.is_file():
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_private(pki.sa_key, _key_pem(sa))
    pub = sa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if not pki.sa_pub.is_file() or pki.sa_pub.read_bytes() != pub:
        _write_private(pki.sa_pub, pub)

    for p in d.iterdir():  # files made by an older run or copied in keep no wider mode
        if p.is_file() and (p.stat().st_mode & 0o077):
            os.chmod(p, 0o600)
    return pki
