"""Search attributes, one row per (run, key), typed so every backend can filter them."""

from __future__ import annotations

from django.db import models

from durable_workflow.models.manager import EngineManager
from durable_workflow.models.runs import WorkflowRun


class SearchAttribute(models.Model):
    objects = EngineManager()

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="attribute_rows")
    key = models.CharField(max_length=64)
    value_string = models.CharField(max_length=191, null=True, blank=True)
    value_number = models.FloatField(null=True, blank=True)
    value_bool = models.BooleanField(null=True, blank=True)

    class Meta:
        db_table = "durable_workflow_search_attribute"
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="durable_workflow_attribute_key")
        ]
        indexes = [
            models.Index(fields=["key", "value_string"], name="dw_attr_key_string"),
            models.Index(fields=["key", "value_number"], name="dw_attr_key_number"),
            models.Index(fields=["key", "value_bool"], name="dw_attr_key_bool"),
        ]

    def __str__(self) -> str:
        return f"{self.key}={self.value_string or self.value_number or self.value_bool}"
