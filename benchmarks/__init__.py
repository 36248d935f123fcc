"""Benchmark suite of durable_workflow: the engine against bare Celery and DBOS.

Entry point: ``python benchmarks/run.py`` (see benchmarks/README.md).
"""
