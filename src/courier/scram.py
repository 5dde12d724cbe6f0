"""SCRAM-SHA-256 (RFC 5802, RFC 7677) for Courier logins; pure functions, no I/O.

A client's secret never travels and is never stored: REGISTER and SET_SECRET carry
a ``models.Verifier`` (salt, iterations, StoredKey, ServerKey), and a login proves
knowledge of the secret with HMACs over the login's ``auth_message``, which binds
both nonces. The server checks the proof with two HMACs (no slow hash per login),
and the client checks the server's signature, so a server without the verifier
cannot pass for the real one.

    verifier = scram.verifier("s3cret")                  # at registration
    message = scram.auth_message("alice", client_nonce, nonce, verifier.salt, 16384)
    proof = scram.client_proof(scram.salted_password("s3cret", salt, 16384), message)
    assert scram.verify_proof(verifier.stored_key, message, proof)   # the server
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from courier import models

DEFAULT_ITERATIONS = 16384
"""PBKDF2 rounds for a new verifier: about 10 ms for the client at each login."""
MIN_ITERATIONS = 4096
"""The fewest rounds a server accepts (RFC 7677's minimum)."""
SALT_BYTES = 16
NONCE_BYTES = 18
KEY_BYTES = 32


def new_secret() -> str:
    """A random secret for a new client: 256 bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def new_nonce() -> str:
    """A fresh nonce (printable, no comma, as SCRAM needs)."""
    return secrets.token_urlsafe(NONCE_BYTES)


def salted_password(secret: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM's SaltedPassword: PBKDF2-HMAC-SHA-256 of the secret (the slow part)."""
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)


def verifier(
    secret: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> models.Verifier:
    """The verifier a server stores for ``secret``; a random salt unless given."""
    if not secret:
        raise ValueError("a secret must not be empty")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = salted_password(secret, salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    return models.Verifier(
        salt, iterations, hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key")
    )


def user_name(client_id: int | None, name: str | None) -> str:
    """The SCRAM user of a login by name, or by id (``#42``)."""
    return name if name is not None else f"#{client_id}"


def auth_message(user: str, client_nonce: str, nonce: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's AuthMessage: client-first-bare, server-first and client-final
    without its proof, joined by commas (no channel binding: ``c=biws``)."""
    escaped = user.replace("=", "=3D").replace(",", "=2C")
    salt_text = base64.b64encode(salt).decode()
    return (
        f"n={escaped},r={client_nonce},r={nonce},s={salt_text},i={iterations},c=biws,r={nonce}"
    ).encode()


def client_proof(salted: bytes, message: bytes) -> bytes:
    """ClientKey XOR HMAC(StoredKey, AuthMessage)."""
    client_key = _hmac(salted, b"Client Key")
    signature = _hmac(hashlib.sha256(client_key).digest(), message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def verify_proof(stored_key: bytes, message: bytes, proof: bytes) -> bool:
    """Whether ``proof`` shows knowledge of the secret behind ``stored_key``."""
    if len(proof) != KEY_BYTES:
        return False
    signature = _hmac(stored_key, message)
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)


def server_signature(server_key: bytes, message: bytes) -> bytes:
    """What the server answers to prove that it holds the verifier too."""
    return _hmac(server_key, message)


def expected_server_signature(salted: bytes, message: bytes) -> bytes:
    """The client's side of ``server_signature``, from its SaltedPassword."""
    return _hmac(_hmac(salted, b"Server Key"), message)


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, "sha256")
