# The physical floor (docs/performance.md): a run update that is not HOT (its status
# changed) adds an entry to every index of the run table; the mostly empty lineage keys
# and the business key are indexed only where set (an equality lookup implies NOT NULL).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_workflow", "0021_history_run_event_type"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="workflowrun",
            name="dw_run_business_key",
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="continued_from",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="continued_as",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="parent_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="child_runs",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="reset_from_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="reset_to_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="durable_workflow.workflowrun",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("business_key__isnull", False)),
                fields=["business_key"],
                name="dw_run_business_key",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("parent_run__isnull", False)),
                fields=["parent_run"],
                name="dw_run_parent",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("continued_from__isnull", False)),
                fields=["continued_from"],
                name="dw_run_continued_from",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("reset_from_run__isnull", False)),
                fields=["reset_from_run"],
                name="dw_run_reset_from",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("reset_to_run__isnull", False)),
                fields=["reset_to_run"],
                name="dw_run_reset_to",
            ),
        ),
    ]
