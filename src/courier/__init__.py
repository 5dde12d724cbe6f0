"""Courier: a three-tier message-passing system on PostgreSQL."""
