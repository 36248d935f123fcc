"""Every fake-mode test runs twice: inside the test's transaction (``db``, like Django's
``TestCase``, where on-commit hooks never fire) and with real commits (``transactional_db``)."""

from __future__ import annotations

import pytest

BOTH_DB_MODES = [
    pytest.param("db", marks=pytest.mark.django_db, id="db"),
    pytest.param("commits", marks=pytest.mark.django_db(transaction=True), id="commits"),
]


@pytest.fixture(params=BOTH_DB_MODES)
def workflow_fake(request, workflow_fake):
    return workflow_fake
