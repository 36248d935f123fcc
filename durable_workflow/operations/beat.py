"""Does Celery beat run the engine's periodic tasks?

Two are needed: the repair pass (``durable_workflow.repair``: re-sends lost messages,
reclaims expired leases, fires due timers nobody sent) and, once schedules exist, the
schedule tick (``durable_workflow.schedule_tick``). Their entries are read from each
Celery app's ``beat_schedule`` (reading the configuration runs
``on_after_configure``, where projects usually add them) and, with
django-celery-beat's database scheduler, from its enabled periodic tasks.
The ``--loop`` management commands do the same work without beat: a project that
runs them instead silences the check (``SILENCED_SYSTEM_CHECKS``).
"""

from __future__ import annotations

from typing import Any

from durable_workflow.conf import get_settings
from durable_workflow.schedules.tasks import SCHEDULE_TICK_TASK
from durable_workflow.transport.celery import REPAIR_TASK, celery_app

#: What each entry's absence leaves undone.
CONSEQUENCES = {
    REPAIR_TASK: "lost messages, expired leases and due timers wait for nobody",
    SCHEDULE_TICK_TASK: "schedules never fire",
}
HINTS = {
    REPAIR_TASK: "add beat_schedule() (durable_workflow.transport.celery) to "
    "app.conf.beat_schedule, or run `manage.py workflow_repair --loop`",
    SCHEDULE_TICK_TASK: "add schedule_beat_entry() (durable_workflow.schedules.tasks) to "
    "app.conf.beat_schedule, or run `manage.py schedule_tick --loop`",
}


def _apps() -> list[Any]:
    apps = [celery_app(None)]
    apps += [celery_app(name) for name in get_settings().CONNECTIONS]
    return list({id(app): app for app in apps}.values())


def _database_scheduler(app: Any) -> bool:
    return "django_celery_beat" in str(app.conf.beat_scheduler or "")


def static_tasks() -> tuple[set[str], bool]:
    """(task names in the apps' ``beat_schedule``, does an app keep its schedule in the
    database, where only a query can tell)."""
    names: set[str] = set()
    in_database = False
    for app in _apps():
        for entry in (app.conf.beat_schedule or {}).values():
            names.add(str(entry.get("task")))
        in_database = in_database or _database_scheduler(app)
    return names, in_database


_PERIODIC_TASK = ("django_celery_beat", "PeriodicTask")


def database_tasks() -> set[str]:
    """Enabled periodic tasks of django-celery-beat (none when it is not installed)."""
    from django.apps import apps

    if not apps.is_installed("django_celery_beat"):
        return set()
    # An optional app's model, unknown to the type checker.
    model: Any = apps.get_model(*_PERIODIC_TASK)
    return {str(name) for name in model.objects.filter(enabled=True).values_list("task", flat=True)}


def schedules_exist() -> bool:
    """Is there a schedule that is not deleted (a paused one fires again when resumed)?"""
    from durable_workflow.models import WorkflowSchedule

    return WorkflowSchedule.objects.exclude(status="deleted").exists()


def missing(*, with_database: bool) -> list[str]:
    """The engine's periodic tasks that no beat entry runs.

    Without the database (``manage.py check``): the repair entry, unless a database
    scheduler keeps entries only a query can see. With it (``check --database``, the
    doctor): the repair entry and, while schedules exist, the schedule tick.
    """
    names, in_database = static_tasks()
    if not with_database:
        return [] if in_database or REPAIR_TASK in names else [REPAIR_TASK]
    if in_database:
        names |= database_tasks()
    wanted = [REPAIR_TASK] + ([SCHEDULE_TICK_TASK] if schedules_exist() else [])
    return [task for task in wanted if task not in names]


def describe(task: str) -> str:
    """One missing entry in words: the task, what goes undone, what to do."""
    return f"no beat entry runs {task} ({CONSEQUENCES[task]}): {HINTS[task]}"
