"""The box's certificates and keys, as kubeadm lays them out for a control plane: one CA, the
API server's serving certificate, a client certificate per component (the API server maps the
subject's CN to the user and O to the groups: Kubernetes docs, "Authenticating", X509 client
certificates), and the key pair that signs and verifies service-account tokens."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=1)
# The in-cluster name of the API server's Service, and the first address of the service range.
SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost")
SERVICE_ADDRESSES = ("127.0.0.1", "10.96.0.1")


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate's subject: the user (CN) and groups (O)."""

    user: str
    groups: tuple[str, ...] = ()


ADMIN = ClientIdentity("box-admin", ("system:masters",))
CONTROLLER_MANAGER = ClientIdentity("system:kube-controller-manager")
SCHEDULER = ClientIdentity("system:kube-scheduler")


@dataclass(frozen=True)
class Pki:
    """Where the files are."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"

    def client_cert(self, identity: ClientIdentity) -> Path:
        return self.directory / f"{_file_name(identity)}.crt"

    def client_key(self, identity: ClientIdentity) -> Path:
        return self.directory / f"{_file_name(identity)}.key"


def create(
    directory: Path, clients: tuple[ClientIdentity, ...], extra_addresses: tuple[str, ...] = ()
) -> Pki:
    """extra_addresses: more IP addresses the serving certificate names (where a client
    reaches the API server through a forwarder: the data-plane tier's VPC endpoint)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _named("cluster-box-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(pki.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = (
        _builder(_named("kube-apiserver"), ca_name, serving_key)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name) for name in SERVICE_NAMES]
                + [
                    x509.IPAddress(ipaddress.ip_address(a))
                    for a in (*SERVICE_ADDRESSES, *extra_addresses)
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(pki.serving_cert, serving.public_bytes(serialization.Encoding.PEM))
    _write(pki.serving_key, _private_pem(serving_key))
    for identity in clients:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [
                *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in identity.groups),
                x509.NameAttribute(NameOID.COMMON_NAME, identity.user),
            ]
        )
        cert = (
            _builder(subject, ca_name, key)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write(pki.client_cert(identity), cert.public_bytes(serialization.Encoding.PEM))
        _write(pki.client_key(identity), _private_pem(key))
    account_key = ec.generate_private_key(ec.SECP256R1())
    _write(pki.service_account_key, _private_pem(account_key))
    _write(
        pki.service_account_public_key,
        account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return pki


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _named(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _file_name(identity: ClientIdentity) -> str:
    return identity.user.replace(":", "-")


def _write(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    path.chmod(0o600)
