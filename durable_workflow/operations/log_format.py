"""JSON log lines that keep the ids operators search by.

Use it from ``LOGGING``::

    "formatters": {"json": {"()": "durable_workflow.operations.log_format.JsonFormatter"}},

Every ``extra=`` field of a record (``instance_id``, ``run_id``, ``task_id``,
``operator``, ``outcome``, ...) becomes a top-level key next to ``time``,
``level``, ``logger`` and ``message``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                document[key] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)
