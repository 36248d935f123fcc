"""The boot-time scan: planted calls and module-state writes found, clean code left alone."""

from __future__ import annotations

import pathlib

import pytest
from django.core import checks
from django.test import override_settings

from durable_workflow import guardrails, registry
from tests.testapp import scan_fixtures

SOURCE = pathlib.Path(scan_fixtures.__file__).read_text().splitlines()


def planted() -> set[tuple[int, str]]:
    """(line, what) of every ``# planted: X`` comment in the fixture module."""
    marks = set()
    for number, text in enumerate(SOURCE, 1):
        if "# planted: " in text:
            marks.add((number, text.split("# planted: ")[1].strip()))
    return marks


def test_every_planted_call_and_state_write_is_found_with_its_line():
    found = guardrails.scan(scan_fixtures.Planted)
    assert {f.filename for f in found} == {scan_fixtures.__file__}
    got = {(f.lineno, f.what.removesuffix("()")) for f in found}
    expected = {
        (
            line,
            what.replace("datetime.", "datetime.datetime.", 1)
            if what.startswith("datetime.")
            else what,
        )
        for line, what in planted()
    }
    assert got == expected


def test_advice_names_the_durable_replacement():
    found = {f.what: f for f in guardrails.scan(scan_fixtures.Planted)}
    assert "dw.now()" in found["time.time()"].advice
    assert "dw.now()" in found["datetime.datetime.now()"].advice
    assert "dw.side_effect" in found["random.choice()"].advice
    assert "self" in found["module state SEEN"].advice
    assert str(found["time.time()"]).startswith(f"{scan_fixtures.__file__}:")


def test_clean_code_has_no_findings():
    assert guardrails.scan(scan_fixtures.Clean) == []


def test_allow_on_the_class_skips_it():
    class Allowed(scan_fixtures.Planted):
        abstract = True
        unsafe_calls = "allow"

    assert guardrails.scan(Allowed) == []


def _guardrail_messages():
    return [
        m for m in checks.run_checks() if m.id in ("durable_workflow.W040", "durable_workflow.E040")
    ]


def test_manage_py_check_reports_findings_as_warnings_errors_or_nothing(monkeypatch):
    monkeypatch.setattr(
        registry,
        "workflows",
        lambda: {"scan.planted": scan_fixtures.Planted, "scan.clean": scan_fixtures.Clean},
    )
    messages = _guardrail_messages()
    assert len(messages) == len(planted())
    assert {m.level for m in messages} == {checks.WARNING}
    assert all(m.obj is scan_fixtures.Planted for m in messages)
    assert any(f"{scan_fixtures.__file__}:" in m.msg and "time.time()" in m.msg for m in messages)
    with override_settings(DURABLE_WORKFLOW={"GUARDRAILS_BOOT": "throw"}):
        assert {m.id for m in _guardrail_messages()} == {"durable_workflow.E040"}
    with override_settings(DURABLE_WORKFLOW={"GUARDRAILS_BOOT": "silent"}):
        assert _guardrail_messages() == []


@pytest.mark.django_db
def test_the_doctor_lists_the_findings(monkeypatch):
    from durable_workflow import clock
    from durable_workflow.operations.doctor import DoctorContext, run_checks

    monkeypatch.setattr(registry, "workflows", lambda: {"scan.planted": scan_fixtures.Planted})
    (result,) = run_checks(DoctorContext(now=clock.now()), only=("guardrails",))
    assert result.status == "warning"
    assert len(result.details["findings"]) == len(planted())
    assert "time.time()" in result.message or "time.time()" in str(result.details)
    monkeypatch.setattr(registry, "workflows", lambda: {"scan.clean": scan_fixtures.Clean})
    (result,) = run_checks(DoctorContext(now=clock.now()), only=("guardrails",))
    assert result.status == "ok"
