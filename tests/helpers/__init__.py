"""Harnesses shared by the test directories (tests/ is on pytest's pythonpath).

servers          `courier serve` subprocesses on free loopback ports, addresses
consoles         a console served in-process, with an HTTP client for it
console_session  a scripted session through the client library, and its bookkeeping
"""
