"""Every test client logs in with a secret, without every test spelling one out.

``default_secrets`` (autouse, tests/conftest.py) makes the client library register
each client with the secret ``secret_for(name)`` and log in with it whenever a test
gives no secret of its own, so the servers under test (which require secrets) get
real SCRAM logins from every test. Tests of missing secrets turn it off with the
``without_default_secrets`` fixture.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from courier import protocol, scram
from courier.client import session


def secret_for(name: str) -> str:
    return f"test-secret-of-{name}"


_names: dict[int, str] = {}  # client id -> name, learnt from REGISTER replies
_verifiers: dict[str, Any] = {}  # name -> verifier (PBKDF2 once per name, not per call)


def _verifier(name: str) -> Any:
    if name not in _verifiers:
        _verifiers[name] = scram.verifier(secret_for(name), iterations=scram.MIN_ITERATIONS)
    return _verifiers[name]


_enabled = [True]


def _with_secret(credentials: session.Credentials | None) -> session.Credentials | None:
    if not _enabled[0] or credentials is None or credentials.secret is not None:
        return credentials
    name = credentials.name or _names.get(credentials.client_id or 0)
    if name is None:
        return credentials
    return dataclasses.replace(credentials, secret=secret_for(name))


@pytest.fixture(scope="session")
def default_secrets() -> Iterator[None]:
    """For the whole session, so that module-scoped clients get secrets too."""
    monkeypatch = pytest.MonkeyPatch()
    start, login, call = session.Session.start, session.Session.login, session.Session.call

    async def start_with_secret(self: session.Session, credentials: Any = None) -> None:
        await start(self, _with_secret(credentials))

    async def login_with_secret(self: session.Session, credentials: Any) -> Any:
        return await login(self, _with_secret(credentials))

    async def call_with_verifier(
        self: session.Session, request: Any, expected: Any, **options: Any
    ) -> Any:
        if isinstance(request, protocol.Register) and request.verifier is None and _enabled[0]:
            request = dataclasses.replace(request, verifier=_verifier(request.name))
        reply = await call(self, request, expected, **options)
        if isinstance(reply, protocol.ClientReply):
            _names[reply.client.id] = reply.client.name
        return reply

    monkeypatch.setattr(session.Session, "start", start_with_secret)
    monkeypatch.setattr(session.Session, "login", login_with_secret)
    monkeypatch.setattr(session.Session, "call", call_with_verifier)
    try:
        yield
    finally:
        monkeypatch.undo()


@pytest.fixture
def without_default_secrets() -> Iterator[None]:
    """Undo ``default_secrets`` for one test: a client without a secret has none."""
    _enabled[0] = False
    try:
        yield
    finally:
        _enabled[0] = True
