"""pytest plugin registered through the ``pytest11`` entry point.

Fixtures:

* ``workflow_fake``: fake mode for one test (ready tasks run inline, activities
  can be mocked); restored afterwards, together with the engine clock;
* ``workflow_clock``: ``travel()``, ``travel_to()``, ``freeze()``, ``now()``
  on the engine clock; reset afterwards.

Both need database access from the test as usual (``db``,
``transactional_db`` or ``@pytest.mark.django_db``). Nothing here imports
Django models until a fixture is used.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from durable_workflow.testing.fake import WorkflowFake
    from durable_workflow.testing.timetravel import WorkflowClock


@pytest.fixture
def workflow_fake() -> Iterator[WorkflowFake]:
    """``WorkflowStub.fake()`` for the duration of the test."""
    from durable_workflow.testing import fake, timetravel

    handle = fake.start()
    try:
        yield handle
        error, handle.error = handle.error, None
        if error is not None:
            raise error  # an on-commit drain failed after the test's last command
    finally:
        handle.restore()
        timetravel.reset()


@pytest.fixture
def workflow_clock() -> Iterator[WorkflowClock]:
    """The engine clock, to travel and freeze; back on the wall clock afterwards."""
    from durable_workflow.testing import timetravel

    try:
        yield timetravel.WorkflowClock()
    finally:
        timetravel.reset()


@pytest.fixture(autouse=True)
def _durable_workflow_isolation() -> Iterator[None]:
    """Never let a fake mode or a moved clock leak from one test into the next."""
    yield
    fake = sys.modules.get("durable_workflow.testing.fake")
    if fake is not None:
        fake.restore()
    clock = sys.modules.get("durable_workflow.clock")
    if clock is not None and not clock.is_real():
        clock.reset()
