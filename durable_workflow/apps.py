from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class DurableWorkflowConfig(AppConfig):
    name = "durable_workflow"
    verbose_name = "Durable workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from durable_workflow import checks, exception_aliases, unsafe_calls  # noqa: F401
        from durable_workflow.conf import get_settings
        from durable_workflow.engine import guards
        from durable_workflow.payload_codecs import configure_from_settings as configure_codecs

        # Before workflow modules are imported: their ``from time import time`` is guarded.
        unsafe_calls.install()
        guards.set_default_policy(get_settings().UNSAFE_CALLS)

        from durable_workflow.payload_storage import configure_from_settings

        configure_from_settings()  # external payload storage driver, if settings name one
        configure_codecs()  # the payload codec chain (compression, encryption), if any
        exception_aliases.configure_from_settings()  # EXCEPTION_TYPES, EXCEPTION_CLASS_ALIASES
        from durable_workflow import interceptors

        interceptors.configure(interceptors.load(get_settings().INTERCEPTORS))

        # The composition root: the backend that publishes task messages, and the modules
        # that register into the executor's lower layers: how eager execution runs each
        # kind of follow-up (activity_task, workflow_task) and where a message is routed
        # (affinity: sticky; sessions: worker sessions). Neither eager.py nor dispatch.py
        # imports them.
        from durable_workflow.executor import dispatch

        dispatch.configure_from_settings()
        from durable_workflow.executor import (  # noqa: F401
            activity_task,
            affinity,
            sessions,
            workflow_task,
        )
        from durable_workflow.operations import bulk  # noqa: F401  (the repair pass resends its jobs)

        # Every installed app's ``workflows`` module registers its classes.
        autodiscover_modules("workflows")

        from durable_workflow.transport import async_worker, worker, worker_hub

        async_worker.connect()  # before registration: a stopping worker hands back first
        worker.connect()
        worker_hub.connect()  # due timers per turn of the worker's event loop
        if get_settings().PROMETHEUS_METRICS:
            # Metrics exist before a prefork pool forks; its children clean up on exit.
            from durable_workflow.contrib.prometheus.registry import connect_celery

            connect_celery()
