"""Django admin pages for the engine's tables (read-only) and operator actions.

Importing this package registers every ``ModelAdmin``; Django's admin
autodiscovery does it for projects that list ``django.contrib.admin``.
"""

from durable_workflow.admin import bulk, fleet, instances, records, runs, schedules, sessions

__all__ = ["bulk", "fleet", "instances", "records", "runs", "schedules", "sessions"]
