"""History events get an index on (run, event_type, sequence).

A run's timeline filtered by event type (the admin's ``?event_type=``) walked every
event of the run through the (run, sequence) index and dropped the other types; the
new index finds the matching events in order.

On PostgreSQL the index is built with ``CREATE INDEX CONCURRENTLY`` (so this migration
is not atomic): writers are not blocked while a history table of tens of millions of
rows is indexed, which takes minutes. Elsewhere, a plain ``CREATE INDEX``.
"""

from django.db import migrations, models

from durable_workflow.migrations._operations import AddIndexWithoutBlocking

INDEX = models.Index(fields=["run", "event_type", "sequence"], name="dw_history_run_type")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("durable_workflow", "0020_fewer_index_entries")]

    operations = [AddIndexWithoutBlocking(model_name="historyevent", index=INDEX)]
