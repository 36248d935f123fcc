"""The test-kit half of ``WorkflowStub``: fake mode, mocks and assertions.

Mixed into ``WorkflowStub`` so tests can write ``WorkflowStub.fake()``.
"""

from __future__ import annotations


class StubTestKit:
    """Class-level testing helpers (filled in by the testing kit)."""
