"""A local certificate authority and a server certificate for loopback TLS.

`courier up --tls` (and the tests) make them: a CA that exists only on this machine,
and a certificate it signs for 127.0.0.1, ::1 and localhost. Private keys are
written mode 0600 (only their owner may read them); the CA's key is not kept, so
nothing can sign another certificate with it later.

    made = certificates.make_local(Path("state/tls"))
    made.ca, made.cert, made.key   # PEM files
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class LocalCertificates:
    ca: Path
    """The CA certificate: what clients trust (``ca=`` / --ca)."""
    cert: Path
    key: Path


def make_local(directory: Path, common_name: str = "Courier local") -> LocalCertificates:
    """Write ca.pem, server.pem and server.key (0600) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name} CA")])
    ca_cert = _ca_certificate(ca_name, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _server_certificate(ca_name, ca_key, server_key, common_name)
    made = LocalCertificates(
        directory / "ca.pem", directory / "server.pem", directory / "server.key"
    )
    _write(made.ca, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(made.cert, server_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(made.key, _private_pem(server_key), 0o600)
    return made


def _ca_certificate(name: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    return (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )


def _server_certificate(
    issuer: x509.Name,
    ca_key: ec.EllipticCurvePrivateKey,
    key: ec.EllipticCurvePrivateKey,
    common_name: str,
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in LOOPBACK_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in LOOPBACK_ADDRESSES]
    return (
        _builder(subject, issuer, key.public_key())
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a little clock skew is fine
        .not_valid_after(now + VALIDITY)
    )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
        crl_sign=cert_sign, encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Create the file with ``mode`` from the start: a key is never readable by others,
    not even for a moment."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
