"""``WorkflowTestCase``: fake mode and a clean clock for Django's own ``TestCase``.

Mix it in before the Django test case class::

    class OrderTests(WorkflowTestCase, TestCase):
        def test_order(self):
            WorkflowStub.mock(ChargeCard, "receipt-1")
            ...

Every test starts in fake mode and ends with fake mode restored and the
engine clock back on the wall clock. ``self.travel(...)`` and
``self.freeze()`` move the clock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from durable_workflow.testing import timetravel


class WorkflowTestCase:
    """A mixin for ``unittest``/Django test cases; put it first in the bases."""

    #: Set to False to start tests outside fake mode (call ``WorkflowStub.fake()`` yourself).
    workflow_fake = True

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        from durable_workflow.testing import fake

        self.workflow_kit = fake.start() if self.workflow_fake else None
        self.addCleanup(_restore)  # type: ignore[attr-defined]

    def travel(self, **delta: Any) -> timetravel.ClockChange:
        return timetravel.travel(**delta)

    def travel_to(self, moment: dt.datetime) -> timetravel.ClockChange:
        return timetravel.travel_to(moment)

    def freeze(self, at: dt.datetime | None = None) -> timetravel.ClockChange:
        return timetravel.freeze(at)


def _restore() -> None:
    """Leave fake mode and reset the clock; re-raise what an on-commit drain swallowed."""
    from durable_workflow.testing import fake

    current = fake.active()
    error = current.error if current is not None else None
    fake.restore()
    timetravel.reset()
    if error is not None:
        raise error
