"""The suite's Django app: registers the workload and names each database connection
after its process (``<role>:<pid>``), so faults can aim at the workers' connections and
the lease audit can tell a holder giving its lease back from another process taking it."""

from __future__ import annotations

import os
from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _name_connection(sender: Any, connection: Any, **_: Any) -> None:
    if connection.vendor != "postgresql":
        return
    role = os.environ.get("DW_CHAOS_ROLE", "harness")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('application_name', %s, false)", [f"{role}:{os.getpid()}"]
        )


class ReliabilityConfig(AppConfig):
    name = "reliability"
    label = "reliability"
    verbose_name = "Reliability suite"

    def ready(self) -> None:
        connection_created.connect(_name_connection, dispatch_uid="reliability-application-name")
