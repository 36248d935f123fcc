"""Operator tooling: doctor checks, history export and replay, retention, metrics.

These modules sit at the edge of the library (next to the admin and the
management commands): they read the engine's tables with plain ORM queries and
act only through the executor's public commands.
"""
