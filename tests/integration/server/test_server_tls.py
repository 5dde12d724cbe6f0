"""TLS between clients and a middleware: real handshakes on loopback with a generated
CA, and clear errors (quickly, not a hang) when the two sides disagree."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

import courier
from courier import certificates, errors, protocol
from courier.server import launcher
from helpers import dsns
from helpers.servers import (
    COURIER,
    ServerProcess,
    StartServer,
    address,
    environment_without_settings,
)

QUICK = 2.0
"""Seconds within which a refused connection must be reported: no waiting on timeouts."""


@pytest.fixture
def made(tmp_path: Path) -> certificates.LocalCertificates:
    return certificates.make_local(tmp_path / "tls")


@pytest.fixture
async def tls_server(
    start_server: StartServer, made: certificates.LocalCertificates
) -> ServerProcess:
    return await start_server(tls_cert=made.cert, tls_key=made.key, ca=made.ca)


async def test_send_and_pop_through_tls(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    async with courier.AsyncClient.connect(address(tls_server), ca=made.ca) as setup:
        await setup.register("tls-alice")
    async with courier.AsyncClient.connect(address(tls_server), name="tls-alice", ca=made.ca) as c:
        await c.create_queue("tls-jobs")
        await c.send("tls-jobs", b"over tls " * 1000)
        message = await c.pop("tls-jobs")
    assert message is not None and message.body == b"over tls " * 1000


def test_the_sync_client_speaks_tls_too(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    _, port = tls_server.address
    with courier.Client.connect(f"localhost:{port}", ca=str(made.ca)) as client:
        assert client.ping() > 0  # the certificate names localhost as well as 127.0.0.1


async def test_requests_sent_just_before_a_tls_peer_closes_all_run(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    """TLS hands the middleware a peer's last chunk and its close together. The sends
    behind the LOGIN in that chunk wait their turn, and still run after the close."""
    async with courier.AsyncClient.connect(address(tls_server), ca=made.ca) as setup:
        writer = await setup.register("tls-closer")
        await setup.register("tls-watcher")
    watching = courier.AsyncClient.connect(address(tls_server), name="tls-watcher", ca=made.ca)
    async with watching as watcher:
        queue = await watcher.create_queue("tls-last-words")
        frames = [protocol.encode(1, protocol.Login(client_id=writer.id, name=None))]
        for request_id in range(2, 22):
            send = protocol.Send((queue.id,), b"before the close", None, 5, None)
            frames.append(protocol.encode(request_id, send))
        context = ssl.create_default_context(cafile=str(made.ca))
        with (
            socket.create_connection(tls_server.address, timeout=5) as plain,
            context.wrap_socket(plain, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"".join(frames))
            # close_notify straight after the frames, replies unread (unwrap may then
            # meet a reply that crossed the close_notify: it was sent anyway)
            with contextlib.suppress(ssl.SSLError, OSError):
                tls.unwrap()
        deadline = time.monotonic() + 10
        while (await watcher.get_queue(queue.id)).message_count < 20:
            assert time.monotonic() < deadline, "the sends after the LOGIN never ran"
            await asyncio.sleep(0.05)
    assert "eof_received" not in tls_server.log  # no warning about the transport's end


async def test_a_plaintext_client_is_told_the_server_speaks_tls(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    started = time.monotonic()
    with pytest.raises(errors.TlsError, match="speaks TLS only"):
        await courier.AsyncClient.connect(address(tls_server), connect_timeout=10.0)
    assert time.monotonic() - started < QUICK
    # A raw peer sending a Courier frame gets a TLS alert record, then the end.
    with socket.create_connection(tls_server.address, timeout=5) as raw:
        raw.sendall(protocol.encode(1, protocol.Ping()))
        answer = raw.recv(64)
        assert answer[:1] == b"\x15" and raw.recv(64) == b""
    await assert_still_serves(tls_server, made)
    assert "refused a plaintext connection" in tls_server.log


async def test_a_client_with_the_wrong_ca_is_refused(
    tls_server: ServerProcess, made: certificates.LocalCertificates, tmp_path: Path
) -> None:
    stranger = certificates.make_local(tmp_path / "other", "Someone else")
    started = time.monotonic()
    with pytest.raises(errors.TlsError, match="certificate is not trusted"):
        await courier.AsyncClient.connect(address(tls_server), ca=stranger.ca, connect_timeout=10)
    with pytest.raises(errors.TlsError, match="certificate is not trusted"):
        await courier.AsyncClient.connect(address(tls_server), tls=True)  # the system's CAs
    assert time.monotonic() - started < QUICK
    await assert_still_serves(tls_server, made)
    assert "TLS handshake with 127.0.0.1" in tls_server.log


async def test_a_silent_peer_does_not_hold_the_door(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    with socket.create_connection(tls_server.address, timeout=5):
        await assert_still_serves(tls_server, made)  # while one says nothing


async def test_a_tls_client_is_told_the_server_speaks_plaintext(
    start_server: StartServer, made: certificates.LocalCertificates
) -> None:
    plain = await start_server()
    started = time.monotonic()
    with pytest.raises(errors.TlsError, match="does not speak TLS"):
        await courier.AsyncClient.connect(address(plain), ca=made.ca, connect_timeout=10.0)
    assert time.monotonic() - started < QUICK


def test_an_unusable_ca_file_is_a_tls_error(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    with pytest.raises(errors.TlsError, match="cannot load the CA bundle"):
        courier.AsyncClient("127.0.0.1:1", ca=not_pem)


def test_serve_wants_both_certificate_and_key(made: certificates.LocalCertificates) -> None:
    done = subprocess.run(
        [str(COURIER), "serve", "--mock", "--port", "0", "--tls-cert", str(made.cert)],
        env=environment_without_settings(), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--tls-cert and --tls-key go together" in done.stderr


def test_serve_refuses_files_that_are_no_certificate_and_key(
    made: certificates.LocalCertificates,
) -> None:
    swapped = ["--tls-cert", str(made.key), "--tls-key", str(made.cert)]
    done = subprocess.run(
        [str(COURIER), "serve", "--mock", "--port", "0", *swapped],
        env=environment_without_settings(), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "cannot load the certificate" in done.stderr


def test_local_certificates_keep_the_key_private(made: certificates.LocalCertificates) -> None:
    assert made.key.stat().st_mode & 0o777 == 0o600
    context = ssl.create_default_context(cafile=str(made.ca))
    assert context.cert_store_stats()["x509_ca"] == 1
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(made.cert, made.key)  # the key matches the certificate


async def assert_still_serves(server: ServerProcess, made: certificates.LocalCertificates) -> None:
    async with courier.AsyncClient.connect(address(server), ca=made.ca) as client:
        assert await client.ping() > 0


def test_cli_flags_and_environment_choose_tls(
    tls_server: ServerProcess, made: certificates.LocalCertificates
) -> None:
    env = environment_without_settings()

    def ping(*flags: str, **extra: str) -> subprocess.CompletedProcess[str]:
        command = [str(COURIER), "ping", "--servers", address(tls_server), *flags]
        return subprocess.run(
            command, env=env | extra, capture_output=True, text=True, timeout=60, check=False
        )

    assert ping("--ca", str(made.ca)).returncode == 0
    assert ping(COURIER_CA=str(made.ca)).returncode == 0
    refused = ping()
    assert refused.returncode == 14 and "speaks TLS only" in refused.stderr


def test_the_dsn_sslmode_reaches_the_database_driver(dsn: str, tmp_path: Path) -> None:
    # The embedded PostgreSQL is built without SSL: a middleware told to require it
    # must refuse to start rather than fall back to plaintext. (Over TCP: through a
    # Unix socket the driver, like libpq, never uses SSL.)
    required = dsns.with_parameters(dsns.over_tcp(dsn), sslmode="require")
    server = launcher.Middleware.start(tmp_path, dsn=required)
    try:
        with pytest.raises(launcher.LaunchFailed) as failed:
            server.wait_ready(timeout=20)
        assert "SSL" in str(failed.value)
    finally:
        server.stop()
