"""Logins with secrets, lockouts, rotation, disabling, queue and topic owners, against
real `courier serve` processes that require secrets (no open login)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from server_harness import Connect

import courier
from courier import errors, models, protocol, scram
from courier.db import listen, repository
from helpers.servers import ServerProcess, StartServer, address

Make = Callable[..., Awaitable[courier.AsyncClient]]


@pytest.fixture
async def secure(start_server: StartServer) -> ServerProcess:
    """A server that takes logins with a secret only."""
    return await start_server(open_login=False)


@pytest.fixture
async def admin(dsn: str) -> tuple[str, str]:
    """An admin client made in the database directly, as `courier up` does."""
    secret = scram.new_secret()
    repo = await repository.Repository.connect(dsn)
    try:
        await repo.register_client("root", models.ClientMode.ADMIN, verifier=scram.verifier(secret))
    finally:
        await repo.close()
    return "root", secret


@pytest.fixture
async def make(secure: ServerProcess) -> Make:
    """``await make(name, secret)``: a client logged in on the secure server; closed after."""
    opened: list[courier.AsyncClient] = []

    async def connect(name: str, secret: str, **options: object) -> courier.AsyncClient:
        client = await courier.AsyncClient.connect(
            address(secure),
            name=name,
            secret=secret,
            **options,  # type: ignore[arg-type]
        )
        opened.append(client)
        return client

    yield connect  # type: ignore[misc]
    for client in opened:
        await client.close()


async def register(server: ServerProcess, name: str, secret: str, mode: str = "read_write") -> int:
    async with courier.AsyncClient.connect(address(server)) as anonymous:
        return (await anonymous.register(name, mode, secret=secret)).id


async def refusal(server: ServerProcess, name: str, secret: str | None) -> errors.CourierError:
    with pytest.raises(errors.CourierError) as caught:
        async with courier.AsyncClient.connect(address(server), name=name, secret=secret):
            pass
    return caught.value


async def test_an_admin_looks_any_client_up_by_id_and_no_one_else_does(
    secure: ServerProcess, admin: tuple[str, str], make: Make
) -> None:
    """GET_CLIENT by id: ids are handed out in order, so only an admin may walk them
    (an open login never holds admin rights, hence a server that wants secrets)."""
    bob_id = await register(secure, "bob", "bob's secret")
    root = await make(*admin)
    assert await root.get_client(bob_id) == models.ClientIdentity(bob_id, "bob")
    with pytest.raises(errors.ClientNotFound, match=r"^no client with id 999999$"):
        await root.get_client(999_999)
    bob = await make("bob", "bob's secret")
    assert root.client_id is not None
    with pytest.raises(errors.NotAuthorised, match="only an admin may look another client up"):
        await bob.get_client(root.client_id)
    assert await bob.get_client(admin[0]) == models.ClientIdentity(root.client_id, admin[0])


async def test_a_client_logs_in_with_its_secret_and_the_session_is_its_own(
    secure: ServerProcess, make: Make
) -> None:
    client_id = await register(secure, "alice", "alice's secret")
    alice = await make("alice", "alice's secret")
    assert alice.client_id == client_id and alice.name == "alice"
    await alice.create_queue("jobs")
    assert await alice.send("jobs", "hi")


async def test_a_wrong_secret_an_unknown_name_and_no_secret_fail_alike(
    secure: ServerProcess, without_default_secrets: None
) -> None:
    await register(secure, "bob", "right")
    wrong = await refusal(secure, "bob", "wrong")
    unknown = await refusal(secure, "nobody", "right")
    missing = await refusal(secure, "bob", None)  # an open LOGIN
    for refused in (wrong, unknown, missing):
        assert type(refused) is errors.NotAuthorised
        assert refused.message == "login failed"


async def test_the_server_answers_every_failed_login_with_the_same_bytes(
    secure: ServerProcess, connect: Connect
) -> None:
    await register(secure, "carol", "right")
    answers = []
    for name in ("carol", "no-such-client"):
        wire = await connect(secure)
        challenge = await wire.ok(protocol.LoginStart(None, name, "abc"))
        assert isinstance(challenge, protocol.LoginChallenge)
        assert challenge.nonce.startswith("abc") and len(challenge.salt) == 16
        answers.append(await wire.call(protocol.LoginProof(bytes(32))))
    assert answers[0] == answers[1]
    assert answers[0] == protocol.ErrorReply(errors.Status.NOT_AUTHORISED, "login failed")


async def test_a_proof_without_a_challenge_and_a_replayed_proof_are_refused(
    secure: ServerProcess, connect: Connect
) -> None:
    await register(secure, "dave", "dave's secret")
    wire = await connect(secure)
    assert await wire.error(protocol.LoginProof(bytes(32))) == errors.Status.BAD_REQUEST
    challenge = await wire.ok(protocol.LoginStart(None, "dave", "n1"))
    assert isinstance(challenge, protocol.LoginChallenge)
    salted = scram.salted_password("dave's secret", challenge.salt, challenge.iterations)
    message = scram.auth_message(
        "dave", "n1", challenge.nonce, challenge.salt, challenge.iterations
    )
    proof = protocol.LoginProof(scram.client_proof(salted, message))
    reply = await wire.ok(proof)
    assert isinstance(reply, protocol.LoginReply)
    assert reply.server_signature == scram.expected_server_signature(salted, message)
    other = await connect(secure)
    await other.ok(protocol.LoginStart(None, "dave", "n1"))  # a new server nonce
    assert await other.error(proof) == errors.Status.NOT_AUTHORISED


async def test_a_client_cannot_register_without_a_secret_or_as_an_admin(
    secure: ServerProcess, without_default_secrets: None
) -> None:
    async with courier.AsyncClient.connect(address(secure)) as anonymous:
        with pytest.raises(errors.BadRequest, match="secret"):
            await anonymous.register("no-secret")
        with pytest.raises(errors.NotAuthorised, match="only an admin"):
            await anonymous.register("sneaky", "admin", secret="x")


async def test_repeated_failures_lock_a_name_out_for_a_while(
    start_server: StartServer, without_default_secrets: None
) -> None:
    server = await start_server(open_login=False, max_login_failures=2)
    await register(server, "erin", "right")
    for _ in range(2):
        assert (await refusal(server, "erin", "wrong")).message == "login failed"
    locked = await refusal(server, "erin", "right")  # the right secret, too soon
    assert type(locked) is errors.NotAuthorised and "too many failed logins" in locked.message
    await asyncio.sleep(1.2)  # the first lockout is 1 s
    async with courier.AsyncClient.connect(address(server), name="erin", secret="right") as erin:
        assert erin.name == "erin"


async def test_a_client_rotates_its_own_secret(secure: ServerProcess, make: Make) -> None:
    await register(secure, "frank", "old")
    frank = await make("frank", "old")
    await frank.set_secret("new")
    assert (await refusal(secure, "frank", "old")).message == "login failed"
    await frank.close()
    assert (await make("frank", "new")).name == "frank"


async def test_only_an_admin_resets_another_clients_secret(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    await register(secure, "gina", "gina's")
    await register(secure, "hal", "hal's")
    hal = await make("hal", "hal's")
    with pytest.raises(errors.NotAuthorised, match="only an admin"):
        await hal.set_secret("taken over", "gina")
    root = await make(*admin)
    await root.set_secret("reset by admin", "gina")
    assert (await refusal(secure, "gina", "gina's")).message == "login failed"
    assert (await make("gina", "reset by admin")).name == "gina"


async def test_a_disabled_client_loses_its_session_and_cannot_log_in(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    await register(secure, "ivan", "ivan's")
    ivan = await make("ivan", "ivan's", failover_timeout=1.0)
    await ivan.create_queue("ivan-jobs")
    root = await make(*admin)
    with pytest.raises(errors.NotAuthorised, match="only an admin"):
        await ivan.disable_client("root")
    await root.disable_client("ivan")
    await asyncio.sleep(0.5)  # the NOTIFY reaches the middleware
    with pytest.raises(errors.CourierError) as caught:
        await ivan.send("ivan-jobs", "still here?")
    assert isinstance(caught.value, errors.ConnectionLost | errors.NotAuthorised)
    with pytest.raises(errors.NotAuthorised, match="login failed"):
        await ivan.send("ivan-jobs", "and now?")  # reconnects, and the login fails
    assert (await refusal(secure, "ivan", "ivan's")).message == "login failed"
    await root.enable_client("ivan")
    assert (await make("ivan", "ivan's")).name == "ivan"


async def test_a_client_disabled_while_the_listen_link_is_down_loses_its_session_after(
    dsn: str, secure: ServerProcess, make: Make
) -> None:
    # Disabled behind the middleware's back (no notification), then the LISTEN link
    # drops and comes back: the notices it may have missed are asked for.
    await register(secure, "nina", "nina's")
    nina = await make("nina", "nina's", failover_timeout=1.0)
    await nina.create_queue("nina-jobs")
    database = await asyncpg.connect(dsn)
    try:
        await database.execute("UPDATE courier_clients SET disabled = true WHERE name = 'nina'")
        await asyncio.sleep(0.5)
        assert await nina.send("nina-jobs", "no notice was sent, so the session lives")
        killed = await database.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = $1",
            listen.APPLICATION_NAME,
        )
    finally:
        await database.close()
    assert killed == 1
    await asyncio.sleep(2.0)  # the middleware listens again, and asks
    with pytest.raises(errors.CourierError) as caught:
        await nina.send("nina-jobs", "still here?")
    assert isinstance(caught.value, errors.ConnectionLost | errors.NotAuthorised)


async def test_only_the_owner_or_an_admin_deletes_or_configures_a_queue(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    await register(secure, "judy", "j")
    await register(secure, "kim", "k")
    judy, kim = await make("judy", "j"), await make("kim", "k")
    for name in ("judys", "judys-too", "judys-third"):
        await judy.create_queue(name)
    with pytest.raises(errors.NotAuthorised, match=r"only the owner of queue .* may delete"):
        await kim.delete_queue("judys")
    with pytest.raises(errors.NotAuthorised, match=r"may configure"):
        await kim.configure_queue("judys", max_deliveries=3)
    await kim.send("judys", "others may still send")  # no ACL: sending stays open
    settings = await judy.configure_queue("judys", max_deliveries=3)
    assert settings.max_deliveries == 3
    await judy.delete_queue("judys")
    root = await make(*admin)
    await root.configure_queue("judys-too", max_deliveries=2)
    await root.delete_queue("judys-too")
    names = {queue.name for queue in await judy.list_queues()}
    assert "judys-third" in names and not {"judys", "judys-too"} & names


async def test_only_the_owner_or_an_admin_deletes_a_topic(
    secure: ServerProcess, make: Make, admin: tuple[str, str], dsn: str
) -> None:
    await register(secure, "tom", "t")
    await register(secure, "una", "u")
    tom, una, root = await make("tom", "t"), await make("una", "u"), await make(*admin)
    for name in ("toms", "toms-too", "orphan"):
        await tom.create_topic(name)
    with pytest.raises(errors.NotAuthorised, match="only the owner of topic toms or an admin"):
        await una.delete_topic("toms")
    await tom.delete_topic("toms")
    await root.delete_topic("toms-too")
    connection = await asyncpg.connect(dsn)  # a topic whose creator is gone: the admins'
    try:
        await connection.execute(
            "UPDATE courier_topics SET created_by = NULL WHERE name = 'orphan'"
        )
    finally:
        await connection.close()
    with pytest.raises(errors.NotAuthorised, match="may delete it"):
        await tom.delete_topic("orphan")
    await root.delete_topic("orphan")
    assert await root.list_topics() == []


async def test_a_subscription_is_ended_by_its_subscriber_the_topics_owner_or_an_admin(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    for name in ("vic", "wes", "xia"):
        await register(secure, name, name)
    vic, wes, xia = [await make(name, name) for name in ("vic", "wes", "xia")]
    root = await make(*admin)
    await vic.create_topic("vics")
    wes_own, xia_own = await wes.subscribe("vics"), await xia.subscribe("vics")
    with pytest.raises(errors.NotAuthorised, match="only its subscriber, the owner of its"):
        await xia.unsubscribe(wes_own)
    with pytest.raises(errors.NotAuthorised, match="only its subscriber may resume it"):
        await xia.subscribe("vics", name="wes")  # naming another's durable subscription
    with pytest.raises(errors.QueueExists):
        await xia.subscribe("vics", name="wes", durable=False)  # a clash, as before
    assert (await wes.subscribe("vics")).queue == wes_own.queue  # its subscriber resumes
    await vic.unsubscribe(wes_own)  # the topic's owner
    await xia.unsubscribe(xia_own)  # the subscriber
    again = await wes.subscribe("vics", name="again")
    await root.unsubscribe(again)  # an admin
    assert (await vic.get_topic("vics")).subscriptions == ()


async def test_an_admin_creates_another_admin(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    root = await make(*admin)
    made = await root.register("deputy", "admin", secret="deputy's")
    assert made.mode is models.ClientMode.ADMIN
    deputy = await make("deputy", "deputy's")
    await register(secure, "leo", "l")
    await deputy.disable_client("leo")
    assert (await refusal(secure, "leo", "l")).message == "login failed"


class Tap:
    """A loopback relay to a server that keeps every byte the client sends."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.sent = bytearray()
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, keep: bool
        ) -> None:
            while data := await source.read(65536):
                if keep:
                    self.sent += data
                sink.write(data)
                await sink.drain()
            sink.close()

        await asyncio.gather(
            pipe(reader, upstream_writer, True), pipe(upstream_reader, writer, False),
            return_exceptions=True,
        )  # fmt: skip

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()


async def test_the_secret_never_travels(secure: ServerProcess) -> None:
    tap = Tap(secure.address)
    through = await tap.start()
    secret = "correct horse battery staple"
    try:
        async with courier.AsyncClient.connect(through) as anonymous:
            await anonymous.register("mallory-proof", secret=secret)
        async with courier.AsyncClient.connect(
            through, name="mallory-proof", secret=secret
        ) as client:
            await client.set_secret(secret + " 2")
    finally:
        await tap.close()
    assert b"mallory-proof" in tap.sent  # the tap did see the logins
    assert secret.encode() not in tap.sent
    assert b"battery" not in tap.sent


async def test_queue_access_lists_hold_on_every_wire_path(
    secure: ServerProcess, make: Make, admin: tuple[str, str]
) -> None:
    for name in ("olga", "lena", "otto"):
        await register(secure, name, name)
    olga, lena, otto = (
        await make("olga", "olga"),
        await make("lena", "lena"),
        await make("otto", "otto"),
    )
    root = await make(*admin)
    guarded = await olga.create_queue("olgas")
    await olga.create_queue("olgas-open")
    with pytest.raises(errors.NotAuthorised, match="only the owner"):
        await otto.set_queue_acl("olgas", senders=["otto"])
    with pytest.raises(errors.ClientNotFound):
        await olga.set_queue_acl("olgas", senders=["nobody-by-that-name"])
    acl = await olga.set_queue_acl("olgas", senders=["lena"], readers=[lena.client_id or 0])
    assert acl == models.QueueAcl(guarded.id, (lena.client_id,), (lena.client_id,))
    assert await root.queue_acl("olgas") == acl
    with pytest.raises(errors.NotAuthorised):
        await lena.queue_acl("olgas")
    # Sends: single, batched, in a transaction, and a publish into a guarded subscription.
    with pytest.raises(errors.NotAuthorised, match="send list"):
        await otto.send("olgas", "no")
    with pytest.raises(errors.NotAuthorised, match="send list"):
        await otto.send_many("olgas", ["a", "b"])
    with pytest.raises(errors.NotAuthorised, match="send list"):
        async with otto.transaction() as tx:
            tx.send("olgas-open", "fine alone")
            tx.send("olgas", "refused")
    assert (await olga.get_queue("olgas-open")).message_count == 0
    await olga.create_topic("olgas-news")
    subscription = await olga.subscribe("olgas-news")
    await olga.set_queue_acl(subscription.queue, senders=[])
    with pytest.raises(errors.NotAuthorised):
        await otto.publish("olgas-news", "no")
    await olga.publish("olgas-news", "the owner may")
    for client in (lena, olga, root):
        await client.send("olgas", "yes")
        await client.send_many("olgas", ["a", "b", "c", "d", "e"])
    # Reads: peek, pop, leased pop, receive, receive_many, by sender, queues_for_me.
    await otto.send("olgas-open", "visible")
    for read in (
        lambda c: c.peek("olgas"),
        lambda c: c.pop("olgas"),
        lambda c: c.pop("olgas", lease=5),
        lambda c: c.receive("olgas", timeout=0.1),
        lambda c: c.receive_many("olgas", max_messages=2, timeout=0.1),
    ):
        with pytest.raises(errors.NotAuthorised, match="read list"):
            await read(otto)
        for client in (lena, olga, root):
            assert await read(client)
    assert "olgas" not in [q.name for q in await otto.queues_for_me()]
    assert "olgas-open" in [q.name for q in await otto.queues_for_me()]
    assert "olgas" in [q.name for q in await lena.queues_for_me()]
    got = await otto.pop(sender=olga.client_id)
    assert got is None or got.queue != guarded.id
    await olga.set_queue_acl("olgas", readers=["lena"])  # anyone may send
    with pytest.raises(errors.NotAuthorised, match="read list"):  # the wait for the reply
        await otto.request("olgas", "question", timeout=0.2)
    await olga.set_queue_acl("olgas")
    assert (await otto.pop("olgas")) is not None


async def test_a_connection_proving_its_secret_is_not_pushed_out_by_newcomers(
    start_server: StartServer, connect: Connect
) -> None:
    # Between LOGIN_START and LOGIN_PROOF the client derives its key (a burst of
    # clients queues for that): newcomers push out idle connections, not this one.
    server = await start_server(open_login=False, max_anonymous=2)
    await register(server, "erin", "erin's secret")
    wire = await connect(server)
    challenge = await wire.ok(protocol.LoginStart(None, "erin", "n1"))
    assert isinstance(challenge, protocol.LoginChallenge)
    idle = [await connect(server) for _ in range(4)]  # two anonymous places: two pushed out
    assert isinstance(await idle[-1].ok(protocol.Ping()), protocol.Pong)
    salted = scram.salted_password("erin's secret", challenge.salt, challenge.iterations)
    message = scram.auth_message(
        "erin", "n1", challenge.nonce, challenge.salt, challenge.iterations
    )
    reply = await wire.ok(protocol.LoginProof(scram.client_proof(salted, message)))
    assert isinstance(reply, protocol.LoginReply) and reply.client.name == "erin"
