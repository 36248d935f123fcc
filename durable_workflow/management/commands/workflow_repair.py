"""``manage.py workflow_repair``: re-send lost task messages and reclaim expired leases.

With ``--instance-id`` / ``--run-id`` it repairs those runs instead, through the
same command as ``WorkflowStub.repair()`` (recorded with ``source="cli"``).
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.conf import get_settings
from durable_workflow.executor import repair_pass
from durable_workflow.executor.control import request_repair
from durable_workflow.logs import get_logger
from durable_workflow.management.command_options import (
    add_namespace_argument,
    add_request_id_argument,
    namespace_option,
    request_id_option,
)
from durable_workflow.models import WorkflowInstance, WorkflowRun
from durable_workflow.namespaces import instance_key
from durable_workflow.operations import loops

logger = get_logger("durable_workflow")


class Command(BaseCommand):
    help = (
        "Re-dispatch ready tasks nobody claimed, expired leases and due timers; or repair "
        "the runs named by --instance-id / --run-id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--loop",
            action="store_true",
            help="keep running passes through database and broker outages (SIGTERM stops)",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between passes with --loop (default: REPAIR_INTERVAL_SECONDS)",
        )
        parser.add_argument(
            "--instance-id",
            action="append",
            default=[],
            metavar="ID",
            help="repair the current run of this instance (repeatable)",
        )
        parser.add_argument(
            "--run-id",
            action="append",
            default=[],
            metavar="RUN_ID",
            help="repair this run; it must be its instance's current run (repeatable)",
        )
        parser.add_argument(
            "--reason", default="", help="operator's reason, recorded on each repair command"
        )
        add_namespace_argument(parser)
        add_request_id_argument(parser)
        parser.add_argument("--json", action="store_true", help="print a JSON report")

    def handle(self, *args: Any, **options: Any) -> None:
        targets = options["instance_id"] or options["run_id"]
        if targets and options["loop"]:
            raise CommandError("--loop repairs everything; do not combine it with targets")
        if targets:
            self._repair_targets(options)
            return
        interval = options["interval"]
        if interval is None:
            interval = get_settings().REPAIR_INTERVAL_SECONDS

        def step() -> None:
            report = repair_pass()
            if options["json"]:
                self.stdout.write(json.dumps(report.as_dict()))
            else:
                line = (
                    f"reclaimed {report.reclaimed} expired leases, "
                    f"re-sent {report.redispatched} tasks"
                )
                if report.bulk_jobs_resent:
                    line += f", re-sent {report.bulk_jobs_resent} stalled bulk job(s)"
                self.stdout.write(line)
            self.stdout.flush()

        if not options["loop"]:
            step()
            return
        stop = threading.Event()
        with loops.stop_on_signals(stop):
            loops.run_forever(step, name="workflow_repair", interval=interval, pause=stop.wait)

    def _repair_targets(self, options: dict[str, Any]) -> None:
        space, self.request_id = namespace_option(options), request_id_option(options)
        results = [
            self._repair_instance(i, options["reason"], space) for i in options["instance_id"]
        ]
        results += [self._repair_run(r, options["reason"]) for r in options["run_id"]]
        for result in results:
            logger.info(
                "workflow_repair %s: %s",
                result["instance_id"],
                result["outcome"],
                extra={
                    "instance_id": result["instance_id"],
                    "run_id": result.get("run_id"),
                    "dw_instance_id": result["instance_id"],
                    "dw_run_id": result.get("run_id"),
                },
            )
            if options["json"]:
                self.stdout.write(json.dumps(result))
            else:
                line = f"{result['outcome']}: {result['instance_id']}"
                if result.get("run_id"):
                    line += f" run {result['run_id']}"
                if result.get("rejection_reason"):
                    line += f" ({result['rejection_reason']})"
                if result.get("reclaimed_leases"):
                    line += f" (reclaimed {result['reclaimed_leases']} expired lease(s))"
                self.stdout.write(line)
        if any(r["outcome"] == "not_found" for r in results):
            raise CommandError("some targets do not exist", returncode=1)

    def _repair_instance(self, instance_id: str, reason: str, namespace: str) -> dict[str, Any]:
        if not WorkflowInstance.objects.filter(key=instance_key(namespace, instance_id)).exists():
            return {"target": instance_id, "instance_id": instance_id, "outcome": "not_found"}
        current = (
            WorkflowRun.objects.filter(namespace=namespace, instance_id=instance_id)
            .order_by("-run_number")
            .values_list("id", flat=True)
            .first()
        )
        outcome = request_repair(
            instance_id,
            source="cli",
            reason=reason,
            namespace=namespace,
            request_id=self.request_id,
        )
        return {
            "target": instance_id,
            "instance_id": instance_id,
            "run_id": str(current) if current else None,
            "outcome": outcome.outcome,
            "accepted": outcome.accepted,
            "rejection_reason": outcome.rejection_reason,
            "command_id": str(outcome.command_id),
            **outcome.metadata,
        }

    def _repair_run(self, run_id: str, reason: str) -> dict[str, Any]:
        try:
            run = WorkflowRun.objects.filter(id=uuid.UUID(run_id)).first()
        except ValueError:
            run = None
        if run is None:
            return {"target": run_id, "instance_id": None, "run_id": run_id, "outcome": "not_found"}
        newest = (
            WorkflowRun.objects.filter(namespace=run.namespace, instance_id=run.instance_id)
            .order_by("-run_number")
            .values_list("id", flat=True)
            .first()
        )
        if newest != run.id:
            return {
                "target": run_id,
                "instance_id": run.instance_id,
                "run_id": run_id,
                "outcome": "rejected_not_current",
                "accepted": False,
                "rejection_reason": "selected_run_not_current",
                "resolved_run_id": str(newest),
            }
        repaired = self._repair_instance(run.instance_id, reason, run.namespace)
        return {**repaired, "target": run_id}
