"""The dispatch backend is chosen once, by the app's ready(), from DISPATCH_BACKEND."""

from __future__ import annotations

import pytest
from django.test import override_settings

from durable_workflow.exceptions import ConfigurationError
from durable_workflow.executor import dispatch
from durable_workflow.transport.celery import CeleryBackend


class RecordingBackend:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, task: object, countdown: float | None) -> None:
        self.sent.append(task)


class NoSend:
    pass


@pytest.fixture
def restore_configured():
    saved = dispatch._configured
    yield
    dispatch._configured = saved


def test_ready_installed_the_celery_backend_by_default():
    assert isinstance(dispatch._configured, CeleryBackend)


def test_the_setting_names_the_backend_and_a_test_backend_goes_over_it(restore_configured):
    path = f"{__name__}.RecordingBackend"
    with override_settings(DURABLE_WORKFLOW={"DISPATCH_BACKEND": path}):
        built = dispatch.configure_from_settings()
    assert isinstance(built, RecordingBackend)
    previous = dispatch.set_backend(None)  # whatever a fixture installed, for this test
    try:
        assert dispatch.backend() is built
        other = RecordingBackend()
        assert dispatch.set_backend(other) is None
        assert dispatch.backend() is other
        dispatch.set_backend(None)
        assert dispatch.backend() is built  # None restores the configured one
    finally:
        dispatch.set_backend(previous)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "CeleryBackend",
        "durable_workflow.transport.celery.Celery\x00Backend",
        "durable_workflow.\ud800.CeleryBackend",
        "a." * 200 + "b",
        42,
        None,
    ],
)
def test_a_malformed_path_is_refused(value):
    with (
        override_settings(DURABLE_WORKFLOW={"DISPATCH_BACKEND": value}),
        pytest.raises(ConfigurationError, match="DISPATCH_BACKEND"),
    ):
        dispatch.configure_from_settings()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("durable_workflow.transport.nowhere.Backend", "DISPATCH_BACKEND"),
        (f"{__name__}.NoSend", "no send"),
    ],
)
def test_a_path_that_leads_nowhere_useful_is_refused(restore_configured, path, message):
    before = dispatch._configured
    with (
        override_settings(DURABLE_WORKFLOW={"DISPATCH_BACKEND": path}),
        pytest.raises(ConfigurationError, match=message),
    ):
        dispatch.configure_from_settings()
    assert dispatch._configured is before  # the one installed stays


def test_without_a_ready_app_sending_says_so(restore_configured):
    dispatch._configured = None
    previous = dispatch.set_backend(None)
    try:
        with pytest.raises(ConfigurationError, match="not ready"):
            dispatch.backend()
    finally:
        dispatch.set_backend(previous)
