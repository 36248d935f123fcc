"""Prometheus metrics (issue 25, item 2): the scrape view's output, parsed, after real runs.

Counters are process-wide, so each test compares a scrape before with one after.
No duration is asserted: only how many observations each histogram received.
"""

from __future__ import annotations

import datetime as dt
import sys

import pytest
from django.contrib.auth.models import Permission, User
from prometheus_client.parser import text_string_to_metric_families

from durable_workflow import clock
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError
from durable_workflow.executor.repair import repair_pass
from durable_workflow.models import Task
from durable_workflow.store import database
from tests.integration.helpers import start, tasks_of

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "scrape-token-0123456789"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def metrics_on(settings):
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "PROMETHEUS_METRICS": True,
        "PROMETHEUS_SCRAPE_TOKEN": TOKEN,
    }


@pytest.fixture
def scraper(client):
    def scrape(**params: str) -> Samples:
        response = client.get("/metrics/", params, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=0.0.4")
        samples: Samples = {}
        for family in text_string_to_metric_families(response.content.decode()):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    return scrape


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_a_run_with_a_retry_and_a_failed_activity_is_counted(metrics_on, scraper, inline):
    before = scraper()
    retried = start("tests.retrying", "prom-retry", 2)  # attempt 1 fails, attempt 2 succeeds
    refused = start("tests.non-retryable", "prom-refused")  # a non-retryable activity failure
    inline.run()
    assert retried.refresh().completed() and refused.refresh().failed()
    after = scraper()

    for workflow_type in ("tests.retrying", "tests.non-retryable"):
        assert (
            grew(
                before,
                after,
                "durable_workflow_workflow_started_total",
                workflow_type=workflow_type,
            )
            == 1
        )
    closed = "durable_workflow_workflow_closed_total"
    assert grew(before, after, closed, workflow_type="tests.retrying", status="completed") == 1
    assert grew(before, after, closed, workflow_type="tests.non-retryable", status="failed") == 1
    assert grew(before, after, closed, workflow_type="tests.retrying", status="failed") == 0

    attempts = "durable_workflow_activity_attempts_total"
    flaky = {"activity_type": "tests.flaky", "queue": "celery"}
    assert grew(before, after, attempts, **flaky, outcome="failed") == 1
    assert grew(before, after, attempts, **flaky, outcome="completed") == 1
    refuse = {"activity_type": "tests.refuse", "queue": "celery"}
    assert grew(before, after, attempts, **refuse, outcome="failed") == 1
    durations = "durable_workflow_activity_attempt_duration_seconds_count"
    assert grew(before, after, durations, **flaky) == 2
    failed = "durable_workflow_activity_failed_total"
    assert grew(before, after, failed, **refuse, category="activity") == 1
    assert grew(before, after, failed, **flaky, category="activity") == 0

    # One observation per workflow task and per activity attempt that was claimed.
    workflow_tasks = {
        "tests.retrying": len(tasks_of(retried, "workflow")),
        "tests.non-retryable": len(tasks_of(refused, "workflow")),
    }
    task_seconds = "durable_workflow_workflow_task_duration_seconds_count"
    replayed = "durable_workflow_workflow_task_replayed_events_count"
    for workflow_type, count in workflow_tasks.items():
        assert count >= 2
        assert (
            grew(before, after, task_seconds, workflow_type=workflow_type, outcome="completed")
            == count
        )
        assert grew(before, after, replayed, workflow_type=workflow_type) == count
    fed = grew(
        before,
        after,
        "durable_workflow_workflow_task_replayed_events_sum",
        workflow_type="tests.retrying",
    )
    assert 0 < fed <= len(retried.history())
    to_start = "durable_workflow_task_schedule_to_start_seconds_count"
    assert grew(before, after, to_start, task_type="activity", queue="celery") == 3
    assert grew(before, after, to_start, task_type="workflow", queue="celery") == sum(
        workflow_tasks.values()
    )

    # Each workflow task took its body from the sticky cache or replayed it cold; the
    # second task of each run found its body warm.
    hits = grew(before, after, "durable_workflow_sticky_cache_hits_total")
    misses = sum(
        grew(before, after, "durable_workflow_sticky_cache_misses_total", reason=reason)
        for reason in ("not_cached", "stale")
    )
    assert hits >= 2 and hits + misses == sum(workflow_tasks.values())


def test_open_runs_and_tasks_are_read_from_the_database(metrics_on, scraper, inline):
    start("tests.sleeper", "prom-sleeper", 600)
    inline.run()  # waits on its timer: an open run, a delayed timer task
    waiting = start("tests.sequential", "prom-waiting", "ada")  # its first task is ready
    Task.objects.filter(run_id=waiting.run_id()).update(queue="payments")
    clock.advance(dt.timedelta(seconds=30))
    samples = scraper()
    assert value(samples, "durable_workflow_database_collector_up") == 1
    runs = "durable_workflow_open_runs"
    assert value(samples, runs, workflow_type="tests.sleeper", queue="celery") == 1
    assert value(samples, runs, workflow_type="tests.sequential", queue="celery") == 1
    payments = {"task_type": "workflow", "queue": "payments"}
    assert value(samples, "durable_workflow_ready_tasks", **payments) == 1
    assert value(samples, "durable_workflow_oldest_ready_task_age_seconds", **payments) >= 30
    assert value(samples, "durable_workflow_delayed_tasks", task_type="timer", queue="celery") == 1
    assert value(samples, "durable_workflow_leased_tasks", **payments) == 0

    without = scraper(database="0")
    assert not [name for name, _ in without if name.startswith("durable_workflow_open_runs")]


def test_limited_queues_show_limits_leases_waiters_and_the_rate_window(
    metrics_on, settings, scraper, inline
):
    from durable_workflow import WorkflowStub, executor
    from durable_workflow.executor import activity_task

    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "QUEUES": {"limited": {"concurrency": 3, "rate": "2/m", "worker_concurrency": 4}},
    }
    stub = WorkflowStub.make("tests.fan-out-limited", "prom-limited")
    stub.start(4, 0)
    workflow_task = Task.objects.get(run_id=stub.run_id(), task_type="workflow")
    executor.run_workflow_task(workflow_task.id)
    for task in Task.objects.filter(run_id=stub.run_id(), task_type="activity"):
        activity_task._claim(task.id)
    samples = scraper()
    queue = {"queue": "limited"}
    limit = "durable_workflow_queue_limit"
    assert value(samples, limit, limit="concurrency", **queue) == 3
    assert value(samples, limit, limit="worker_concurrency", **queue) == 4
    assert value(samples, limit, limit="rate", **queue) == 2
    assert value(samples, "durable_workflow_queue_rate_period_seconds", **queue) == 60
    assert value(samples, "durable_workflow_queue_leased_attempts", **queue) == 2
    assert value(samples, "durable_workflow_queue_rate_window_starts", **queue) == 2
    waiting = "durable_workflow_queue_waiting_tasks"
    assert value(samples, waiting, reason="rate", **queue) == 1  # and one sent ahead
    assert value(samples, waiting, reason="sent", **queue) == 1
    assert value(samples, waiting, reason="concurrency", **queue) == 0


def test_a_repair_pass_counts_what_it_did(metrics_on, scraper, inline):
    before = scraper()
    start("tests.sequential", "prom-repair", "ada")  # ready, its message presumed lost
    clock.advance(dt.timedelta(seconds=60))
    report = repair_pass()
    after = scraper()
    assert grew(before, after, "durable_workflow_repair_passes_total", outcome="ok") == 1
    assert report.redispatched >= 1
    for action, count in report.as_dict().items():
        assert grew(before, after, "durable_workflow_repair_tasks_total", action=action) == count


def test_a_rolled_back_start_counts_nothing(metrics_on, scraper):
    before = scraper()
    with pytest.raises(RuntimeError), database.atomic():
        start("tests.sequential", "prom-rolled-back", "ada")
        raise RuntimeError
    after = scraper()
    started = "durable_workflow_workflow_started_total"
    assert grew(before, after, started, workflow_type="tests.sequential") == 0


def test_nothing_is_recorded_with_the_setting_off(settings, client, inline):
    settings.DURABLE_WORKFLOW = {
        **settings.DURABLE_WORKFLOW,
        "PROMETHEUS_METRICS": False,
        "PROMETHEUS_SCRAPE_TOKEN": TOKEN,
    }

    def started() -> float:
        response = client.get("/metrics/", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        families = text_string_to_metric_families(response.content.decode())
        samples = {(s.name, tuple(s.labels.items())): s.value for f in families for s in f.samples}
        return value(
            samples, "durable_workflow_workflow_started_total", workflow_type="tests.identity"
        )

    before = started()
    start("tests.identity", "prom-off")
    inline.run()
    assert started() == before


def test_who_may_scrape(metrics_on, client):
    assert client.get("/metrics/").status_code == 401  # anonymous, no token
    wrong = client.get("/metrics/", HTTP_AUTHORIZATION="Bearer not-the-token-at-all")
    assert wrong.status_code == 401
    basic = client.get("/metrics/", HTTP_AUTHORIZATION=f"Basic {TOKEN}")
    assert basic.status_code == 401
    user = User.objects.create_user("viewer", password="x")
    client.force_login(user)
    assert client.get("/metrics/").status_code == 403  # no permission
    user.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client.force_login(User.objects.get(pk=user.pk))
    assert client.get("/metrics/").status_code == 200
    openmetrics = client.get("/metrics/", HTTP_ACCEPT="application/openmetrics-text")
    assert openmetrics["Content-Type"].startswith("application/openmetrics-text")
    assert openmetrics.content.decode().rstrip().endswith("# EOF")


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ({"PROMETHEUS_METRICS": "yes"}, "must be True or False"),
        ({"PROMETHEUS_SCRAPE_TOKEN": "short"}, "at least 16 characters"),
        ({"PROMETHEUS_SCRAPE_TOKEN": 12345678901234567}, "at least 16 characters"),
    ],
)
def test_bad_settings_are_refused(settings, setting, problem):
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, **setting}
    with pytest.raises(ConfigurationError, match=problem):
        get_settings()


def test_without_prometheus_client_the_error_names_the_extra(settings, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    for name in [n for n in sys.modules if n.startswith("durable_workflow.contrib.prometheus")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ConfigurationError, match=r"durable-workflow\[prometheus\]"):
        import durable_workflow.contrib.prometheus.urls  # noqa: F401
    settings.DURABLE_WORKFLOW = {**settings.DURABLE_WORKFLOW, "PROMETHEUS_METRICS": True}
    with pytest.raises(ConfigurationError, match=r"durable-workflow\[prometheus\]"):
        get_settings()
