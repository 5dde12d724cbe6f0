"""TLS for the Courier wire protocol: the server's and the client's SSL contexts.

Both sides insist on TLS 1.2 or later. A client verifies the server's certificate
and host name against ``ca`` (a PEM bundle), or against the system's trust store
when no bundle is given.

    server = tls.server_context(Path("server.pem"), Path("server.key"))
    client = tls.client_context(Path("ca.pem"))
"""

from __future__ import annotations

import ssl
from pathlib import Path

from courier import errors

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2

_RECORD_TYPES = frozenset({0x14, 0x15, 0x16, 0x17})
"""The first byte of a TLS record: change cipher spec, alert, handshake, data.
A Courier frame starts with its version (1), so the two never look alike."""


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The context a middleware wraps its listener in; TlsError if the files are bad."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise errors.TlsError(f"cannot load the certificate {cert} and key {key}: {exc}") from exc
    return context


def client_context(ca: Path | str | None = None) -> ssl.SSLContext:
    """A verifying client context: ``ca`` as the trust anchors, else the system's."""
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca is not None else None)
    except (OSError, ssl.SSLError) as exc:
        raise errors.TlsError(f"cannot load the CA bundle {ca}: {exc}") from exc
    context.minimum_version = MINIMUM_VERSION
    return context


def looks_like_tls(data: bytes) -> bool:
    """Whether bytes that came where Courier frames were expected are a TLS record
    (a TLS server answering a plaintext client, or a TLS client's greeting)."""
    return len(data) >= 2 and data[0] in _RECORD_TYPES and data[1] == 0x03


def handshake_failure(exc: ssl.SSLError | ssl.CertificateError, server: str) -> errors.TlsError:
    """A client's failed handshake, said plainly."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or str(exc)
        return errors.TlsError(f"{server}: the server's certificate is not trusted ({reason})")
    reason = getattr(exc, "reason", None) or str(exc)
    if reason == "WRONG_VERSION_NUMBER":
        return errors.TlsError(f"{server} does not speak TLS (connect without TLS)")
    return errors.TlsError(f"TLS handshake with {server} failed: {reason}")
