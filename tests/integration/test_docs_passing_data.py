"""The code on docs/how-to/passing-data.md and docs/reference/errors.md runs as shown."""

from __future__ import annotations

import datetime as dt
import pathlib
import re
import types
from decimal import Decimal
from typing import Any

import pytest

from durable_workflow import WorkflowStub
from durable_workflow.converter import from_plain, to_plain, unregister_converter

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"

pytestmark = pytest.mark.django_db


def blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)


def run(source: str, name: str) -> dict[str, Any]:
    module = types.ModuleType(name)
    module.__dict__["__name__"] = name
    import sys

    sys.modules[name] = module  # annotations resolve in the module, as in an app
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module.__dict__


def test_the_billing_example_round_trips_its_dataclasses(workflow_fake):
    example, _money = blocks("how-to/passing-data.md")
    page = run(example, "docs_passing_data")
    invoice = page["Invoice"](
        "inv-1",
        dt.date(2025, 3, 1),
        [page["Line"]("a", Decimal("10.50")), page["Line"]("b", Decimal("0.25"))],
    )
    stub = WorkflowStub.make(page["Billing"], "docs-billing")
    stub.start(invoice)
    total = stub.result(timeout=5)["inv-1"]
    assert total == Decimal("10.75") and str(total) == "10.75"


def test_the_money_converter_example():
    page = run(blocks("how-to/passing-data.md")[1], "docs_money")
    money_cls = page["Money"]
    try:
        back = from_plain(to_plain(money_cls(Decimal("1.50"), "EUR")), money_cls)
        assert (back.amount, back.currency) == (Decimal("1.50"), "EUR")
        assert str(back.amount) == "1.50"
    finally:
        unregister_converter(money_cls)


def test_the_error_example_tells_the_two_ways_apart(workflow_fake):
    (example,) = blocks("reference/errors.md")
    approve = run(example, "docs_errors")["approve"]

    class Stub:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def update(self, *args: Any) -> Any:
            raise self.error

    from durable_workflow import UpdateHandlerFailedError, UpdateRejectedError

    rejected = UpdateRejectedError("validation_failed", "no", validation_errors={"step": ["x"]})
    assert approve(Stub(rejected), 1).startswith("refused: validation_failed")
    failed = UpdateHandlerFailedError(
        "update_failed", "boom", exception_type="ValueError", failure_message="boom"
    )
    assert approve(Stub(failed), 1) == "the handler raised ValueError: boom"
