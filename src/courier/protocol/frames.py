"""Typed frames: what a client sends (requests) and what a server answers (replies).

Every class is a frozen value object; ``codec.encode`` turns one into bytes and
``codec.parse`` turns a ``RawFrame`` back into one. A reply does not know its
opcode: the header of a reply repeats the opcode of the request it answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias, TypeGuard

from courier import errors, models
from courier.protocol import constants
from courier.protocol.constants import Opcode


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One whole frame cut from the byte stream; the body is not yet parsed."""

    version: int
    opcode: int
    flags: int
    request_id: int
    body: bytes

    @property
    def is_response(self) -> bool:
        return bool(self.flags & constants.FLAG_RESPONSE)

    @property
    def size(self) -> int:
        """Bytes on the wire: header plus body."""
        return constants.HEADER_SIZE + len(self.body)


# --- requests -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Register:
    """Create a client; ``verifier`` is what the server keeps of its secret (None: no
    secret, which only a server with open login accepts). Mode admin needs an admin."""

    name: str
    mode: models.ClientMode
    verifier: models.Verifier | None = None


@dataclass(frozen=True, slots=True)
class Login:
    """Open login, by id or by name (exactly one is given), without a secret: only a
    server started with open login accepts it (the lab's); others answer NOT_AUTHORISED."""

    client_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class LoginStart:
    """First step of a SCRAM-SHA-256 login, by id or by name (exactly one)."""

    client_id: int | None
    name: str | None
    client_nonce: str


@dataclass(frozen=True, slots=True)
class LoginProof:
    """Second step: the client's proof over the login's auth message."""

    proof: bytes


@dataclass(frozen=True, slots=True)
class SetSecret:
    """Replace a client's secret by its verifier: one's own, or (an admin) anyone's,
    by id or by name (exactly one)."""

    client_id: int | None
    name: str | None
    verifier: models.Verifier


@dataclass(frozen=True, slots=True)
class SetClientEnabled:
    """An admin disables a client (ending its session) or enables it again."""

    client_id: int | None
    name: str | None
    enabled: bool


@dataclass(frozen=True, slots=True)
class GetClient:
    """Look a client up by id or by name: exactly one of the two is given. The reply
    names its id and name only (ClientIdentityReply)."""

    client_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class Logout:
    pass


@dataclass(frozen=True, slots=True)
class Cancel:
    """End a waiting RECEIVE or AWAIT_RESPONSE sent earlier on this connection."""

    request_id: int


@dataclass(frozen=True, slots=True)
class CreateQueue:
    name: str


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    queue_id: int
    if_empty: bool


@dataclass(frozen=True, slots=True)
class GetQueue:
    """Look a queue up by id or by name: exactly one of the two is given."""

    queue_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class ListQueues:
    pass


@dataclass(frozen=True, slots=True)
class SetQueueAcl:
    """Set both access lists of a queue (None: anyone), as its owner or an admin (see
    models.QueueAcl); each client by id (int) or name (str)."""

    queue_id: int
    senders: tuple[int | str, ...] | None
    readers: tuple[int | str, ...] | None


@dataclass(frozen=True, slots=True)
class GetQueueAcl:
    """A queue's access lists, for its owner or an admin."""

    queue_id: int


@dataclass(frozen=True, slots=True)
class ConfigureQueue:
    """Set how a queue treats failing and expired messages, and its limits (see
    models.QueueSettings)."""

    queue_id: int
    max_deliveries: int | None
    dead_letter_queue: int | None
    dead_letter_expired: bool
    max_messages: int | None = None
    max_bytes: int | None = None
    overflow: models.Overflow = models.Overflow.REFUSE


@dataclass(frozen=True, slots=True)
class Send:
    """Store one message per queue, hidden for delay_ms and expiring after ttl_ms.

    A retry with the same dedup_id (within the server's window) stores nothing and
    is answered with the ids of the first send. ``properties`` travel with the
    message (text keys to typed values; empty: none). ``persistent`` False skips
    the database's write-ahead log: faster, and lost if the database crashes.
    """

    queue_ids: tuple[int, ...]
    body: bytes
    receiver: int | None
    priority: int
    context: int | None
    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: models.Properties = field(default_factory=dict, hash=False)
    persistent: bool = True


@dataclass(frozen=True, slots=True)
class Read:
    """Peek (pop=False) or pop one message; None means any queue / any sender.

    A pop with lease_ms > 0 leases the message instead of deleting it: ACK it.
    A ``selector`` (docs/selectors.md) narrows the read to messages it matches.
    """

    queue_id: int | None
    sender_id: int | None
    order: models.Order
    pop: bool
    lease_ms: int = 0
    selector: str | None = None


@dataclass(frozen=True, slots=True)
class Receive:
    """Pop, waiting up to timeout_ms for a message to arrive; lease_ms and selector
    as for Read."""

    queue_id: int
    sender_id: int | None
    order: models.Order
    timeout_ms: int
    lease_ms: int = 0
    selector: str | None = None


@dataclass(frozen=True, slots=True)
class AwaitResponse:
    """Pop the message addressed to me with this context, waiting up to timeout_ms."""

    queue_id: int
    context: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class QueuesForMe:
    pass


@dataclass(frozen=True, slots=True)
class Ack:
    """Done with a leased message: delete it."""

    delivery_id: int


@dataclass(frozen=True, slots=True)
class Nack:
    """Give a leased message back for redelivery after delay_ms; reason becomes its failure."""

    delivery_id: int
    delay_ms: int = 0
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Extend:
    """Keep holding a leased message: its lease now ends lease_ms from now."""

    delivery_id: int
    lease_ms: int


@dataclass(frozen=True, slots=True)
class SendMany:
    """Store every message in each queue, all or none, in order."""

    queue_ids: tuple[int, ...]
    messages: tuple[models.Draft, ...]


@dataclass(frozen=True, slots=True)
class ReceiveMany:
    """Pop up to max_messages, waiting up to timeout_ms for the first (0: no wait).

    Once one is there it answers at once, unless min_messages asks for more: then it
    goes on taking until it holds that many or max_wait_ms has passed since the first.
    lease_ms and selector as for Read.
    """

    queue_id: int
    sender_id: int | None
    order: models.Order
    max_messages: int
    timeout_ms: int = 0
    lease_ms: int = 0
    min_messages: int = 1
    max_wait_ms: int = 0
    selector: str | None = None


@dataclass(frozen=True, slots=True)
class AckMany:
    """Acknowledge each leased message; each delivery gets its own result."""

    delivery_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NackMany:
    """Give each leased message back (as Nack); each delivery gets its own result."""

    delivery_ids: tuple[int, ...]
    delay_ms: int = 0
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """Delete a topic (by id or by name: exactly one), its subscriptions and their queues."""

    topic_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class GetTopic:
    """Look a topic up, with its subscriptions, by id or by name: exactly one."""

    topic_id: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class ListTopics:
    pass


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Subscribe to a topic (by id or by name: exactly one) under ``subscription``
    (None: the server picks a name); a non-durable one ends with the session."""

    topic_id: int | None
    topic_name: str | None
    subscription: str | None
    durable: bool


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """End the subscription whose queue this is; the queue goes with it."""

    queue_id: int


@dataclass(frozen=True, slots=True)
class CreateReplicated:
    """Create a replicated queue of ``replicas`` members on distinct nodes."""

    name: str
    replicas: int
    policy: models.Policy = models.Policy.BALANCED


@dataclass(frozen=True, slots=True)
class DeleteReplicated:
    """Delete a replicated queue, its members and their messages."""

    name: str


@dataclass(frozen=True, slots=True)
class GetReplicated:
    """A replicated queue with its members' producers, consumers and lengths."""

    name: str


@dataclass(frozen=True, slots=True)
class JoinReplicated:
    """Join a replicated queue as a producer or consumer: be given a member."""

    name: str
    role: models.Role


@dataclass(frozen=True, slots=True)
class LeaveReplicated:
    """Give up a place taken by JOIN_REPLICATED."""

    place_id: int


@dataclass(frozen=True, slots=True)
class Publish:
    """Store a copy of the message in every subscription of the topic, all or none;
    the other fields as for Send (every copy carries the ``properties`` and is
    ``persistent`` or not)."""

    topic_id: int | None
    topic_name: str | None
    body: bytes
    receiver: int | None
    priority: int
    context: int | None
    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: models.Properties = field(default_factory=dict, hash=False)
    persistent: bool = True


@dataclass(frozen=True, slots=True)
class Commit:
    """Apply every operation, all or none, in order: the first that fails undoes the
    rest. ``age_ms`` is how long the client kept the transaction open."""

    age_ms: int
    operations: tuple[Send | Publish | Ack, ...]


# --- replies --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pong:
    server_time_ns: int
    """The server's wall clock (ns since the Unix epoch) when it answered."""


@dataclass(frozen=True, slots=True)
class ClientReply:
    client: models.ClientInfo


@dataclass(frozen=True, slots=True)
class ClientIdentityReply:
    """What GET_CLIENT tells about another client: its id and name, nothing more."""

    client: models.ClientIdentity


@dataclass(frozen=True, slots=True)
class Done:
    pass


@dataclass(frozen=True, slots=True)
class LoginChallenge:
    """The server's half of a login: the whole nonce (the client's, then the
    server's), and the salt and iterations to derive the salted secret with."""

    nonce: str
    salt: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class LoginReply:
    """A login that succeeded: the client, and the server's signature over the auth
    message, which the client checks before trusting the session."""

    client: models.ClientInfo
    server_signature: bytes


@dataclass(frozen=True, slots=True)
class QueueReply:
    queue: models.Queue


@dataclass(frozen=True, slots=True)
class QueueListReply:
    queues: tuple[models.Queue, ...]


@dataclass(frozen=True, slots=True)
class QueueSettingsReply:
    settings: models.QueueSettings


@dataclass(frozen=True, slots=True)
class QueueAclReply:
    acl: models.QueueAcl


@dataclass(frozen=True, slots=True)
class MessageIdsReply:
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MessageReply:
    message: models.Message


@dataclass(frozen=True, slots=True)
class BatchIdsReply:
    """Per message of a SEND_MANY, in order, its ids (one per queue, in queue order)."""

    ids: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class MessagesReply:
    messages: tuple[models.Message, ...]


@dataclass(frozen=True, slots=True)
class SettledReply:
    """Per delivery of an ACK_MANY or NACK_MANY, in order, what became of it."""

    settled: tuple[models.Settled, ...]


@dataclass(frozen=True, slots=True)
class TopicReply:
    topic: models.Topic


@dataclass(frozen=True, slots=True)
class TopicListReply:
    topics: tuple[models.Topic, ...]


@dataclass(frozen=True, slots=True)
class SubscriptionReply:
    subscription: models.Subscription


@dataclass(frozen=True, slots=True)
class ReplicatedReply:
    replicated: models.ReplicatedQueue


@dataclass(frozen=True, slots=True)
class PlaceReply:
    place: models.Place


@dataclass(frozen=True, slots=True)
class PublishReply:
    """The copies a PUBLISH stored: the subscriptions' queues (ascending) and, in the
    same order, the message id in each. Both empty: the topic had no subscription."""

    queue_ids: tuple[int, ...]
    message_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CommitReply:
    """Per operation of a COMMIT, in order, the ids it stored (a send's per queue, a
    publish's per subscription; none for an ack)."""

    results: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A failed request: any opcode may be answered with one."""

    status: errors.Status
    message: str

    def to_exception(self) -> errors.CourierError:
        return errors.for_status(self.status, self.message)


Request: TypeAlias = (
    Ping
    | Register
    | Login
    | Logout
    | Cancel
    | LoginStart
    | LoginProof
    | SetSecret
    | SetClientEnabled
    | GetClient
    | CreateQueue
    | DeleteQueue
    | GetQueue
    | ListQueues
    | ConfigureQueue
    | SetQueueAcl
    | GetQueueAcl
    | Send
    | Read
    | Receive
    | AwaitResponse
    | QueuesForMe
    | Ack
    | Nack
    | Extend
    | SendMany
    | ReceiveMany
    | AckMany
    | NackMany
    | CreateTopic
    | DeleteTopic
    | GetTopic
    | ListTopics
    | Subscribe
    | Unsubscribe
    | Publish
    | Commit
    | CreateReplicated
    | DeleteReplicated
    | GetReplicated
    | JoinReplicated
    | LeaveReplicated
)

Reply: TypeAlias = (
    Pong
    | ClientReply
    | ClientIdentityReply
    | Done
    | LoginChallenge
    | LoginReply
    | QueueReply
    | QueueListReply
    | QueueSettingsReply
    | QueueAclReply
    | MessageIdsReply
    | MessageReply
    | BatchIdsReply
    | MessagesReply
    | SettledReply
    | TopicReply
    | TopicListReply
    | SubscriptionReply
    | PublishReply
    | CommitReply
    | ReplicatedReply
    | PlaceReply
    | ErrorReply
)

REQUEST_TYPES: dict[Opcode, type[Request]] = {
    Opcode.PING: Ping,
    Opcode.REGISTER: Register,
    Opcode.LOGIN: Login,
    Opcode.LOGOUT: Logout,
    Opcode.CANCEL: Cancel,
    Opcode.LOGIN_START: LoginStart,
    Opcode.LOGIN_PROOF: LoginProof,
    Opcode.SET_SECRET: SetSecret,
    Opcode.SET_CLIENT_ENABLED: SetClientEnabled,
    Opcode.GET_CLIENT: GetClient,
    Opcode.CREATE_QUEUE: CreateQueue,
    Opcode.DELETE_QUEUE: DeleteQueue,
    Opcode.GET_QUEUE: GetQueue,
    Opcode.LIST_QUEUES: ListQueues,
    Opcode.CONFIGURE_QUEUE: ConfigureQueue,
    Opcode.SET_QUEUE_ACL: SetQueueAcl,
    Opcode.GET_QUEUE_ACL: GetQueueAcl,
    Opcode.SEND: Send,
    Opcode.READ: Read,
    Opcode.RECEIVE: Receive,
    Opcode.AWAIT_RESPONSE: AwaitResponse,
    Opcode.QUEUES_FOR_ME: QueuesForMe,
    Opcode.ACK: Ack,
    Opcode.NACK: Nack,
    Opcode.EXTEND: Extend,
    Opcode.SEND_MANY: SendMany,
    Opcode.RECEIVE_MANY: ReceiveMany,
    Opcode.ACK_MANY: AckMany,
    Opcode.NACK_MANY: NackMany,
    Opcode.CREATE_TOPIC: CreateTopic,
    Opcode.DELETE_TOPIC: DeleteTopic,
    Opcode.GET_TOPIC: GetTopic,
    Opcode.LIST_TOPICS: ListTopics,
    Opcode.SUBSCRIBE: Subscribe,
    Opcode.UNSUBSCRIBE: Unsubscribe,
    Opcode.PUBLISH: Publish,
    Opcode.COMMIT: Commit,
    Opcode.CREATE_REPLICATED: CreateReplicated,
    Opcode.DELETE_REPLICATED: DeleteReplicated,
    Opcode.GET_REPLICATED: GetReplicated,
    Opcode.JOIN_REPLICATED: JoinReplicated,
    Opcode.LEAVE_REPLICATED: LeaveReplicated,
}

REPLY_TYPES: dict[int, type[Reply]] = {
    Opcode.PING: Pong,
    Opcode.REGISTER: ClientReply,
    Opcode.LOGIN: ClientReply,
    Opcode.LOGOUT: Done,
    Opcode.CANCEL: Done,
    Opcode.LOGIN_START: LoginChallenge,
    Opcode.LOGIN_PROOF: LoginReply,
    Opcode.SET_SECRET: Done,
    Opcode.SET_CLIENT_ENABLED: Done,
    Opcode.GET_CLIENT: ClientIdentityReply,
    Opcode.CREATE_QUEUE: QueueReply,
    Opcode.DELETE_QUEUE: Done,
    Opcode.GET_QUEUE: QueueReply,
    Opcode.LIST_QUEUES: QueueListReply,
    Opcode.CONFIGURE_QUEUE: QueueSettingsReply,
    Opcode.SET_QUEUE_ACL: QueueAclReply,
    Opcode.GET_QUEUE_ACL: QueueAclReply,
    Opcode.SEND: MessageIdsReply,
    Opcode.READ: MessageReply,
    Opcode.RECEIVE: MessageReply,
    Opcode.AWAIT_RESPONSE: MessageReply,
    Opcode.QUEUES_FOR_ME: QueueListReply,
    Opcode.ACK: Done,
    Opcode.NACK: Done,
    Opcode.EXTEND: Done,
    Opcode.SEND_MANY: BatchIdsReply,
    Opcode.RECEIVE_MANY: MessagesReply,
    Opcode.ACK_MANY: SettledReply,
    Opcode.NACK_MANY: SettledReply,
    Opcode.CREATE_TOPIC: TopicReply,
    Opcode.DELETE_TOPIC: Done,
    Opcode.GET_TOPIC: TopicReply,
    Opcode.LIST_TOPICS: TopicListReply,
    Opcode.SUBSCRIBE: SubscriptionReply,
    Opcode.UNSUBSCRIBE: Done,
    Opcode.PUBLISH: PublishReply,
    Opcode.COMMIT: CommitReply,
    Opcode.CREATE_REPLICATED: ReplicatedReply,
    Opcode.DELETE_REPLICATED: Done,
    Opcode.GET_REPLICATED: ReplicatedReply,
    Opcode.JOIN_REPLICATED: PlaceReply,
    Opcode.LEAVE_REPLICATED: Done,
}
"""The successful reply type for each request opcode (ErrorReply answers any). Typed
by int: an Opcode is an int, so a frame's opcode number finds it without an enum
lookup."""

OPCODES: dict[type[Request], Opcode] = {cls: op for op, cls in REQUEST_TYPES.items()}


def reply_type(opcode: Opcode) -> type[Reply]:
    """The successful reply type that answers a request with this opcode."""
    return REPLY_TYPES[opcode]


def opcode_of(request: Request) -> Opcode:
    """The opcode that carries this request."""
    return OPCODES[type(request)]


def is_request(message: object) -> TypeGuard[Request]:
    return type(message) in OPCODES


def is_reply(message: object) -> TypeGuard[Reply]:
    return type(message) in REPLY_CLASSES


REPLY_CLASSES = frozenset({*REPLY_TYPES.values(), ErrorReply})
