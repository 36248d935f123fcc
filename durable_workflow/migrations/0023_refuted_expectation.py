"""A PostgreSQL function that fails a transaction with the engine's own SQLSTATE.

The engine sends some answers it assumes rather than reads (``store.roundtrips``'s
expectations) as statements that must hold when they run. A statement that does
not hold calls this function, which raises SQLSTATE ``DW001``: the code the
executor recognises a refuted assumption by, whatever language or wording the
server's messages are in. Nothing on SQLite (the engine makes no such
assumptions there).
"""

from typing import Any

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION durable_workflow_refuted(expected text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'DW001',
        MESSAGE = 'durable_workflow: expectation refuted: ' || expected;
END
$body$
"""

DROP = "DROP FUNCTION IF EXISTS durable_workflow_refuted(text)"


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("durable_workflow", "0022_sparse_run_indexes")]

    operations = [migrations.RunPython(create, drop)]
