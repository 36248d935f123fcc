"""``DurableWorkflowError``, the root of every error the library raises.

It has a module of its own so that ``exceptions.client`` can derive from it without
importing the package's ``__init__``, which imports ``exceptions.client``;
``durable_workflow.exceptions`` is where it is named.
"""

from __future__ import annotations


class DurableWorkflowError(Exception):
    """Root of every error raised by durable_workflow."""


# A failure is recorded under its class's dotted path (``engine/exception_types.py``).
DurableWorkflowError.__module__ = "durable_workflow.exceptions"
