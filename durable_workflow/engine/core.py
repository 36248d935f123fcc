"""The parts every feature of the runtime works through, bundled once per run.

``Core`` holds the run's determinism ledger, scheduler, operation table,
outbox and payload converter, and the two moves that need more than one of
them: claiming a step and failing the body.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import NoReturn

from durable_workflow.engine import failures, guards
from durable_workflow.engine.events import HistoryEvent
from durable_workflow.engine.ledger import DeterminismLedger
from durable_workflow.engine.operations import OperationTable
from durable_workflow.engine.outbox import Outbox
from durable_workflow.engine.payloads import Payloads
from durable_workflow.engine.scheduler import Scheduler
from durable_workflow.engine.signatures import Signature, describe_signature
from durable_workflow.exceptions import NonDeterminismError


@dataclass(frozen=True, slots=True, eq=False)
class Core:
    ledger: DeterminismLedger
    scheduler: Scheduler
    ops: OperationTable
    outbox: Outbox
    payloads: Payloads
    policy: failures.FailurePolicy

    def claim(self, sig: Signature) -> tuple[int, HistoryEvent | None]:
        """Claim the next step for a call of ``sig``; returns it and what history recorded.

        A mismatch with history stops the task (the body cannot catch it).
        """
        scheduler = self.scheduler
        if scheduler.unwinding or scheduler.restricted:
            scheduler.check_may_step(sig, describe_signature)
        try:
            return self.ledger.claim(sig)
        except NonDeterminismError as error:
            self.fail_fatally(error)

    def fail_fatally(self, error: BaseException) -> NoReturn:
        """Stop the task: ``error`` leaves ``feed`` and nothing is persisted."""
        if isinstance(error, NonDeterminismError):  # rare: worth a look at the stack
            error.explain(
                recent_steps=self.ledger.steps_before(error.step),
                call_site=guards.call_site(sys._getframe(1)),
            )
        self.scheduler.fail_fatally(error)

    def body_failed(self, error: BaseException) -> None:
        """Workflow code let ``error`` escape. The run fails (first failure wins) when the
        workflow declares ``error`` a failure of the run, or history says the run failed
        already (a replay of a failed run); an interrupt stops the task as it is; anything
        else fails the task (``BodyFailed``): the run waits for a fix and a repair."""
        scheduler = self.scheduler
        scheduler.escaped(error)
        if self.outbox.closed is not None or scheduler.fatal is not None:
            return
        if isinstance(error, failures.INTERRUPTS):
            scheduler.fatal = error
        elif self.ledger.failed_in_history or failures.fails_run(error, self.policy.declared()):
            self.outbox.fail(error)
        else:
            scheduler.fatal = failures.BodyFailed(error)
