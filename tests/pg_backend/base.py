"""PostgreSQL for the test suite: Django's backend, emptied between tests by DELETE.

Between transactional tests Django empties every table with one ``TRUNCATE``, which on
PostgreSQL replaces each table's files on disk: about a second per test on a busy
machine, most of the PostgreSQL suite's time. A test leaves a handful of rows, so
``DELETE`` is far cheaper. Django creates foreign keys ``DEFERRABLE INITIALLY
DEFERRED`` and runs the flush in one transaction, so the order of the deletes does not
matter, and they all travel in one round trip. Content types and permissions are kept:
the flush's ``post_migrate`` would only write the same rows again. Everything else is
the stock backend (``ENGINE = "tests.pg_backend"``).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations

#: Rows that ``post_migrate`` recreates after every flush, identically.
KEPT = {"django_content_type", "auth_permission"}


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(
        self, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        if reset_sequences or allow_cascade:
            return super().sql_flush(
                style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        # One string: one round trip (psycopg sends a statement list without parameters
        # as one simple query).
        return [" ".join(f"DELETE FROM {self.quote_name(t)};" for t in tables if t not in KEPT)]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
