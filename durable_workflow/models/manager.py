"""The manager of every engine model.

Inside the engine's transaction the engine holds some of its writes back, to send
them with its next statement (:mod:`durable_workflow.store.roundtrips`). A query
through the ORM is a statement of its own, so it sends them first: the store's
ORM queries then see the database as the code before them left it, and run inside
the transaction (whose ``BEGIN`` may be held back too). Nothing is sent outside
that transaction, or when nothing waits.
"""

from __future__ import annotations

from typing import TypeVar

from django.db import models

from durable_workflow.store import roundtrips

M = TypeVar("M", bound=models.Model)


class EngineManager(models.Manager[M]):
    def get_queryset(self) -> models.QuerySet[M]:
        roundtrips.flush()
        return super().get_queryset()
