import io

import pytest
from django.core.management import call_command
from django.test import override_settings


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = io.StringIO()
    call_command("makemigrations", "durable_workflow", "--check", "--dry-run", stdout=out)


def test_bad_settings_are_reported_by_system_checks():
    from durable_workflow.checks import check_settings

    with override_settings(DURABLE_WORKFLOW={"NOT_A_KEY": 1}):
        errors = check_settings()
    assert [e.id for e in errors] == ["durable_workflow.E001"]
    assert "NOT_A_KEY" in errors[0].msg
    with override_settings(DURABLE_WORKFLOW={"ACTIVITY_LEASE_SECONDS": "5"}):
        assert check_settings()[0].id == "durable_workflow.E001"


def test_eager_celery_is_reported():
    from durable_workflow.checks import check_celery
    from tests.celery_app import app

    app.conf.task_always_eager = True
    try:
        ids = [m.id for m in check_celery()]
    finally:
        app.conf.task_always_eager = False
    assert "durable_workflow.W002" in ids


def test_sqlite_without_immediate_mode_is_reported(settings):
    from durable_workflow.checks import check_sqlite_mode

    assert check_sqlite_mode() == []  # the test settings do it right


@pytest.mark.django_db
def test_manage_py_check_passes():
    call_command("check", "--fail-level", "WARNING")


@pytest.mark.parametrize(
    ("caches", "expected"),
    [
        ({"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}, "W010"),
        ({"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}, "E011"),
        ({"other": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}, "E011"),
        ({"default": {"BACKEND": "django_redis.cache.RedisCache"}}, None),
    ],
)
def test_signed_webhooks_need_a_shared_replay_cache(settings, caches, expected):
    from durable_workflow.checks import check_webhook_replay_cache

    settings.CACHES = caches
    assert check_webhook_replay_cache() == []  # signatures off: no replay cache needed
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature", "SIGNATURE_SECRET": "s"}
    ids = [message.id for message in check_webhook_replay_cache()]
    assert ids == ([f"durable_workflow.{expected}"] if expected else [])


def test_bad_webhook_settings_are_reported(settings):
    from durable_workflow.checks import check_webhook_replay_cache

    settings.DURABLE_WORKFLOW_WEBHOOKS = {"SIGNATURE_TOLERANCE_SECONDS": 0}
    assert [m.id for m in check_webhook_replay_cache()] == ["durable_workflow.E010"]
