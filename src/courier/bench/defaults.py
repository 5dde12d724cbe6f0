"""Names and defaults shared by the benchmarks and their command line (cheap to import)."""

from __future__ import annotations

from courier import config

COURIER = "courier"
COURIER_DB = "courier-db"
RABBITMQ = "rabbitmq"
SYSTEMS = (COURIER, COURIER_DB, RABBITMQ)
PERSISTENT = "persistent"
NON_PERSISTENT = "non-persistent"
MODES = (PERSISTENT, NON_PERSISTENT)
"""Courier's delivery modes; RabbitMQ runs in its own (durable queues) either way."""
BY_LEVEL = "levels"
BY_SYSTEM = "systems"
ORDERS = (BY_LEVEL, BY_SYSTEM)
"""How a sweep orders its runs: at each level every system in turn, or each system
over every level."""

CLIENT_LEVELS = (1, 16, 64, 256, 1024)
DURATION_S = 10.0
WARMUP_S = 2.0
PROCESSES = 2
MIDDLEWARES = 2
MESSAGE_SIZE = 200
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"

CHURN_CLIENTS = 64
CHURN_DURATION_S = 600.0
CHURN_INTERVAL_S = 60.0
FLAT_BACKGROUND = (0, 1_000_000, 10_000_000)
FLAT_SAMPLES = 2000
POPS_MESSAGES = 50_000
POPS_POPPERS = (1, 4, 16, 64)
POPS_BATCH = 16
FUZZ_FRAMES = 1_000_000
FUZZ_CONNECTIONS = 32
FUZZ_FRAME_TIMEOUT_S = 2.0

SERVE = config.ServerSettings()
"""What `courier serve` uses unless told otherwise (pool size, clients per instance)."""

CHAOS_MESSAGES = 1_000_000
CHAOS_PRODUCERS = 8
CHAOS_CONSUMERS = 8
CHAOS_MIDDLEWARES = 3
CHAOS_KILL_INTERVAL_S = 10.0
CHAOS_LEASE_S = 5.0
CHAOS_PROCESS_S = 0.0
CHAOS_WINDOW = 16
