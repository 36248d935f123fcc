"""Namespaces on instances, runs, tasks, commands and stream messages.

Every existing row moves to the ``default`` namespace. An instance id is now unique
per namespace: the instance's primary key becomes ``key`` (the old column, renamed:
in the default namespace the key is the instance id, so existing keys stay as they
are) and a run names its instance by (namespace, instance_id) instead of a foreign
key. Reversible while every row is still in the default namespace.
"""

from typing import Any

from django.db import migrations, models
from django.db.models import F


def copy_instance_ids(apps: Any, schema_editor: Any) -> None:
    instance = apps.get_model("durable_workflow", "WorkflowInstance")
    instance.objects.using(schema_editor.connection.alias).update(instance_id=F("key"))


def refuse_if_namespaced(apps: Any, schema_editor: Any) -> None:
    alias = schema_editor.connection.alias
    for name in ("WorkflowInstance", "WorkflowRun", "WorkflowMessage"):
        model = apps.get_model("durable_workflow", name)
        if model.objects.using(alias).exclude(namespace="default").exists():
            raise RuntimeError(
                "cannot unapply 0019_namespaces: rows outside the 'default' namespace exist "
                "(an instance id is only unique per namespace); delete or move them first"
            )


DEFAULT_NAMESPACE = models.CharField(default="default", max_length=128)


class Migration(migrations.Migration):

    dependencies = [
        ("durable_workflow", "0018_workflow_queues"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="workflowrun", name="durable_workflow_run_number_unique"
        ),
        migrations.RemoveConstraint(model_name="workflowrun", name="dw_run_deduplication_open"),
        # The run's foreign key column becomes a plain column: same name, same values.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterField(
                    model_name="workflowrun",
                    name="instance",
                    field=models.CharField(db_column="instance_id", max_length=191),
                ),
            ],
            state_operations=[
                migrations.RemoveField(model_name="workflowrun", name="instance"),
                migrations.AddField(
                    model_name="workflowrun",
                    name="instance_id",
                    field=models.CharField(max_length=191),
                ),
            ],
        ),
        migrations.RenameField(model_name="workflowinstance", old_name="instance_id", new_name="key"),
        migrations.AlterField(
            model_name="workflowinstance",
            name="key",
            field=models.CharField(max_length=320, primary_key=True, serialize=False),
        ),
        migrations.AddField(
            model_name="workflowinstance", name="namespace", field=DEFAULT_NAMESPACE.clone()
        ),
        migrations.AddField(
            model_name="workflowinstance",
            name="instance_id",
            field=models.CharField(default="", max_length=191),
            preserve_default=False,
        ),
        migrations.RunPython(copy_instance_ids, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="workflowinstance",
            constraint=models.UniqueConstraint(
                fields=("namespace", "instance_id"), name="dw_instance_namespace_id"
            ),
        ),
        migrations.AddField(
            model_name="workflowrun", name="namespace", field=DEFAULT_NAMESPACE.clone()
        ),
        # A relation without a column (the ORM's view of (namespace, instance_id)); state
        # only, since SQLite's schema editor cannot remove such a field on unapply.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="workflowrun",
                    name="instance",
                    field=models.ForeignObject(
                        from_fields=["namespace", "instance_id"],
                        on_delete=models.DO_NOTHING,
                        related_name="runs",
                        to="durable_workflow.workflowinstance",
                        to_fields=["namespace", "instance_id"],
                    ),
                ),
            ],
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.UniqueConstraint(
                fields=("namespace", "instance_id", "run_number"),
                name="durable_workflow_run_number_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("deduplication_id__isnull", False),
                    models.Q(
                        (
                            "status__in",
                            ["cancelled", "completed", "failed", "terminated"],
                        ),
                        _negated=True,
                    ),
                ),
                fields=("namespace", "deduplication_id"),
                name="dw_run_deduplication_open",
            ),
        ),
        migrations.AddField(model_name="task", name="namespace", field=DEFAULT_NAMESPACE.clone()),
        migrations.AddField(
            model_name="workflowcommand", name="namespace", field=DEFAULT_NAMESPACE.clone()
        ),
        migrations.RemoveConstraint(
            model_name="workflowmessage", name="durable_workflow_message_sequence"
        ),
        migrations.RemoveConstraint(
            model_name="workflowmessage", name="durable_workflow_message_idempotency"
        ),
        migrations.AddField(
            model_name="workflowmessage", name="namespace", field=DEFAULT_NAMESPACE.clone()
        ),
        migrations.AddConstraint(
            model_name="workflowmessage",
            constraint=models.UniqueConstraint(
                fields=("namespace", "target_instance_id", "stream_key", "sequence"),
                name="durable_workflow_message_sequence",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowmessage",
            constraint=models.UniqueConstraint(
                fields=("namespace", "target_instance_id", "stream_key", "idempotency_key"),
                name="durable_workflow_message_idempotency",
            ),
        ),
        # Last, so that unapplying checks first.
        migrations.RunPython(migrations.RunPython.noop, refuse_if_namespaced),
    ]
