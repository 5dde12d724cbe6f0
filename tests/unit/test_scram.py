"""courier.scram is SCRAM-SHA-256 as RFC 7677 specifies it, and a proof proves."""

from __future__ import annotations

import base64

from courier import scram

# RFC 7677, section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc_message() -> bytes:
    return scram.auth_message("user", CLIENT_NONCE, NONCE, SALT, 4096)


def test_the_rfc_7677_example_gives_its_proof_and_server_signature() -> None:
    salted = scram.salted_password("pencil", SALT, 4096)
    proof = scram.client_proof(salted, rfc_message())
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    signature = scram.expected_server_signature(salted, rfc_message())
    assert base64.b64encode(signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_server_checks_a_proof_with_the_verifier_alone() -> None:
    verifier = scram.verifier("pencil", salt=SALT, iterations=4096)
    salted = scram.salted_password("pencil", SALT, 4096)
    assert scram.verify_proof(
        verifier.stored_key, rfc_message(), scram.client_proof(salted, rfc_message())
    )
    assert scram.server_signature(verifier.server_key, rfc_message()) == (
        scram.expected_server_signature(salted, rfc_message())
    )


def test_a_wrong_secret_or_another_login_fails_the_proof() -> None:
    verifier = scram.verifier("pencil", salt=SALT, iterations=4096)
    wrong = scram.client_proof(scram.salted_password("pencil!", SALT, 4096), rfc_message())
    assert not scram.verify_proof(verifier.stored_key, rfc_message(), wrong)
    right = scram.client_proof(scram.salted_password("pencil", SALT, 4096), rfc_message())
    replayed = scram.auth_message("user", CLIENT_NONCE, NONCE + "x", SALT, 4096)
    assert not scram.verify_proof(verifier.stored_key, replayed, right)
    assert not scram.verify_proof(verifier.stored_key, rfc_message(), right[:-1])


def test_a_verifier_keeps_nothing_of_the_secret_and_salts_each_time() -> None:
    first, second = scram.verifier("same secret"), scram.verifier("same secret")
    assert first.salt != second.salt and first.stored_key != second.stored_key
    assert first.iterations == scram.DEFAULT_ITERATIONS
    assert b"same secret" not in first.stored_key + first.server_key + first.salt


def test_user_names_escape_what_scram_reserves() -> None:
    assert scram.user_name(42, None) == "#42"
    message = scram.auth_message("a,b=c", "n1", "n1n2", b"s" * 16, 4096)
    assert message.startswith(b"n=a=2Cb=3Dc,r=n1,")
