"""Architecture guards: the engine stays pure, the public API stays as documented."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import durable_workflow

PACKAGE = pathlib.Path(durable_workflow.__file__).parent

PUBLIC_API = {
    "ActivityInboundInterceptor",
    "ClientInterceptor",
    "Interceptor",
    "InvalidHeaderError",
    "InvalidNamespaceError",
    "WorkflowInboundInterceptor",
    "WorkflowOutboundInterceptor",
    "ModelRef",
    "register_converter",
    "MessageFailedError",
    "ModelInstanceNotFoundError",
    "QueryHandlerFailedError",
    "QueryRejectedError",
    "ResetRefusedError",
    "ResetResult",
    "SignalFailedError",
    "SignalRejectedError",
    "UpdateHandlerFailedError",
    "UpdateRejectedError",
    "WorkflowCancelledError",
    "WorkflowClosedError",
    "WorkflowFailedError",
    "WorkflowResultTimeoutError",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "WorkerSessionHandle",
    "WorkerSessionOptions",
    "WorkerSessionRejected",
    "worker_session",
    "LocalActivityOptions",
    "local_activity",
    "execute_local_activity",
    "DEFAULT_VERSION",
    "deprecate_patch",
    "get_version",
    "patched",
    "upsert_memo",
    "upsert_search_attributes",
    "ActivityTimeoutError",
    "AsyncWorkflowCodeError",
    "Activity",
    "ActivityCancelled",
    "ActivityFailed",
    "ActivityOptions",
    "ChildWorkflowFailed",
    "CommandRejected",
    "ConfigurationError",
    "DuplicateStartPolicy",
    "DurableWorkflowError",
    "InvalidDurationError",
    "InvalidInstanceIdError",
    "InvalidValueError",
    "NonDeterminismError",
    "NonRetryableError",
    "NotInActivityError",
    "NotInWorkflowError",
    "PayloadCodecError",
    "StartOptions",
    "StartResult",
    "StructuralLimitExceeded",
    "UnknownTypeError",
    "UnresolvedFailureError",
    "VersionNotSupported",
    "Workflow",
    "WorkflowAlreadyStartedError",
    "WorkflowDeduplicatedError",
    "WorkflowCancelled",
    "WorkflowNotFoundError",
    "WorkflowOrmAccessError",
    "NonDeterministicCallError",
    "WorkflowParkedError",
    "WorkflowDescription",
    "WorkflowStub",
    "activity",
    "days",
    "execute_activity",
    "hours",
    "minutes",
    "months",
    "now",
    "seconds",
    "side_effect",
    "timer",
    "uuid4",
    "uuid7",
    "weeks",
    "years",
    "CommandResult",
    "QueryCommandError",
    "QueryFailedError",
    "SignalWithStartResult",
    "UpdateFailedError",
    "UpdateResult",
    "UpdateWaitTimedOutError",
    "query",
    "signal",
    "update",
    "wait",
    "wait_signal",
    "wait_with_timeout",
    "ChildWorkflowCancelled",
    "ChildWorkflowHandle",
    "ChildWorkflowOptions",
    "ChildWorkflowTerminated",
    "DurableOperationCancelled",
    "OperationHandle",
    "ParentClosePolicy",
    "SelectionResult",
    "all",
    "child",
    "continue_as_new",
    "execute_child_workflow",
    "parallel",
    "run_async",
    "select",
    # issue 21: everyday patterns
    "ExternalWorkflowHandle",
    "external_workflow",
    "start_child",
    "ActivityCompletionHandle",
    "ActivityCompletionRejected",
    "ActivityInfo",
    "CompleteAsync",
    "WorkflowInfo",
    "activity_completion",
    "activity_info",
    "info",
    "Lock",
    "Semaphore",
    "all_handlers_finished",
    "UpdateWithStartResult",
}


def test_public_exports_are_frozen():
    assert set(durable_workflow.__all__) == PUBLIC_API
    for name in PUBLIC_API:
        assert getattr(durable_workflow, name) is not None


def test_engine_imports_neither_django_nor_celery():
    for path in (PACKAGE / "engine").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"django", "celery", "kombu"}, (path, name)


def test_engine_runs_without_django_installed_in_the_process():
    code = (
        "import sys; import durable_workflow.engine.runtime; "
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m); "
        "assert 'celery' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE.parent)


def test_cancellation_exceptions_escape_except_exception():
    assert not issubclass(durable_workflow.WorkflowCancelled, Exception)
    assert not issubclass(durable_workflow.ActivityCancelled, Exception)


def test_modules_stay_small():
    """No module over 550 lines (STYLE.md), migrations aside."""
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts
    }
    over = {path: lines for path, lines in sizes.items() if lines > 550}
    assert not over, f"modules over 550 lines: {over}"


def test_exception_classes_keep_their_recorded_path():
    """A failure is recorded under its class's dotted path: a class moved to a module of
    the ``exceptions`` package keeps ``durable_workflow.exceptions.<Name>``."""
    from durable_workflow import exceptions

    for name in exceptions.__all__:
        value = getattr(exceptions, name)
        if isinstance(value, type):
            assert value.__module__ == "durable_workflow.exceptions", name
            assert value.__qualname__ == name


def test_celery_task_names_are_fixed():
    from durable_workflow.transport import celery

    assert celery.TASK_NAMES == {
        "workflow": "durable_workflow.workflow_task",
        "activity": "durable_workflow.activity_task",
        "timer": "durable_workflow.timer_task",
    }
    assert celery.REPAIR_TASK == "durable_workflow.repair"


def test_beat_entries_are_importable_before_django_loads_its_apps():
    """``proj/celery.py`` builds its beat schedule while Django is still importing the
    project (issue 31): neither entry may need the models."""
    script = (
        "import django.apps\n"
        "from durable_workflow.schedules.tasks import schedule_beat_entry\n"
        "from durable_workflow.transport.celery import beat_schedule\n"
        "entries = {**beat_schedule(), **schedule_beat_entry()}\n"
        "assert not django.apps.apps.ready\n"
        "print(sorted(entries))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "durable-workflow-repair" in done.stdout
    assert "durable-workflow-schedule-tick" in done.stdout


def test_the_engine_opens_transactions_on_its_own_database():
    """Bare ``transaction.atomic()``, ``transaction.on_commit()`` and ``django.db.connection``
    mean ``default``; the engine's tables may be elsewhere (issue 31): it goes through
    ``durable_workflow.store.database`` (or ``sql.atomic(model)``) instead."""
    package = pathlib.Path(durable_workflow.__file__).parent
    allowed = {package / "store" / "database.py", package / "store" / "roundtrips.py"}
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            imported = isinstance(node, ast.ImportFrom) and node.module == "django.db"
            if imported and any(alias.name == "connection" for alias in node.names):
                offenders.append(f"{path.relative_to(package)}: imports connection")
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = node.func.value
            if not (isinstance(target, ast.Name) and target.id == "transaction"):
                continue
            unaliased = not any(k.arg == "using" for k in node.keywords)
            if node.func.attr in ("atomic", "on_commit") and unaliased:
                offenders.append(f"{path.relative_to(package)}:{node.lineno}: {node.func.attr}")
    assert offenders == []
