"""Bulk jobs: one operator action over a large selection of runs, in batches.

``create_job`` records the job and one pending item per selected run in one
transaction; ``enqueue`` hands it to the Celery task ``run_bulk_job`` after that
transaction commits (the runs list does both; ``manage.py workflow_bulk`` may run
it in its own process instead). ``process`` works batch by batch, each batch one
transaction that locks the job row, acts on the batch's pending items (the same
command as the single-run action, recorded per run) and marks them with their
outcome, so that:

* a worker that dies mid-batch leaves that batch's commands rolled back with its
  items still pending, and a later ``process`` (Celery redelivers the message, or an
  operator runs ``workflow_bulk --resume``) takes up exactly the pending items: no
  run is acted on twice;
* ``cancel`` marks the job cancelled; the batch in progress (holding the lock)
  finishes and no other starts;
* a job whose worker died and whose message is not coming back (a Redis broker
  redelivers an unacknowledged message only after its visibility timeout, an hour by
  default) is *stalled*: open, its progress unmoved for ``BULK_STALLED_AFTER_SECONDS``.
  The doctor reports it and the repair pass sends its message again
  (``resend_stalled``). Sending it to a job that is in fact alive only makes a second
  ``process`` that waits for the job lock and finds fewer pending items.

Cancel, terminate and archive also carry a request id per item
(``bulk:<job>:<item>``), so a repeated command is answered from the first.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from celery import shared_task
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet

from durable_workflow import clock, namespaces
from durable_workflow.conf import get_settings
from durable_workflow.executor import repair
from durable_workflow.logs import get_logger
from durable_workflow.models import (
    BulkItemState,
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
    WorkflowRun,
)
from durable_workflow.store import database

logger = get_logger("durable_workflow")

BULK_TASK = "durable_workflow.bulk_job"
#: Operations a bulk job may carry out (signal, update and query stay per-run).
BULK_OPERATIONS = ("cancel", "terminate", "repair", "retry", "reset", "archive")
OPEN_STATUSES = (BulkJobStatus.QUEUED, BulkJobStatus.RUNNING)
#: Items written per INSERT when a job is created.
_CREATE_CHUNK = 1000

Progress = Callable[[BulkJob], None]


def _between_batches(job: BulkJob) -> None:
    """Called after each committed batch: tests replace it to simulate a worker that
    dies between batches."""


def _within_batch(job: BulkJob, item: BulkJobItem) -> None:
    """Called after each run's command, before its batch commits (the same, mid-batch)."""


def batch_size() -> int:
    return max(1, int(get_settings().BULK_BATCH_SIZE))


def inline_max() -> int:
    return max(0, int(get_settings().BULK_INLINE_MAX_RUNS))


def create_job(
    operation: str,
    targets: Iterable[tuple[str, uuid.UUID | None]],
    *,
    reason: str,
    operator: str,
    filter: str = "",
    options: dict[str, Any] | None = None,
    size: int | None = None,
) -> BulkJob:
    """Record a queued job over ``targets`` (``(instance_id, run_id)`` pairs)."""
    if operation not in BULK_OPERATIONS:
        raise ValueError(f"not a bulk operation: {operation!r}")
    options = json.loads(json.dumps(options or {}, cls=DjangoJSONEncoder))
    options.pop("reason", None)
    now = clock.now()
    with database.atomic():
        job = BulkJob.objects.create(
            operation=operation,
            reason=reason,
            operator=operator[:150],
            filter=filter[:4000],
            options=options,
            batch_size=max(1, size or batch_size()),
            created_at=now,
            updated_at=now,
        )
        total = 0
        chunk: list[BulkJobItem] = []
        for instance_id, run_id in targets:
            chunk.append(BulkJobItem(job=job, instance_id=instance_id, run_id=run_id))
            if len(chunk) >= _CREATE_CHUNK:
                BulkJobItem.objects.bulk_create(chunk)
                total += len(chunk)
                chunk = []
        BulkJobItem.objects.bulk_create(chunk)
        total += len(chunk)
        job.total = total
        job.save(update_fields=["total"])
    logger.info(
        "bulk job %s: %s of %d runs by %s",
        job.id,
        operation,
        total,
        operator,
        extra={"bulk_job_id": str(job.id), "operation": operation, "operator": operator},
    )
    return job


def enqueue(job: BulkJob) -> None:
    """Send the job to a Celery worker once the current transaction commits."""
    job_id = str(job.id)
    database.on_commit(lambda: send(job_id))


def send(job_id: str) -> None:
    """Publish the task message (the broker edge)."""
    from durable_workflow.transport.celery import celery_app

    celery_app().send_task(BULK_TASK, args=[job_id])


def cancel(job_id: uuid.UUID | str) -> bool:
    """Stop the job: no batch starts after this. False when it had already ended."""
    now = clock.now()
    changed = BulkJob.objects.filter(id=job_id, status__in=OPEN_STATUSES).update(
        status=BulkJobStatus.CANCELLED, finished_at=now, updated_at=now
    )
    return bool(changed)


def process(job_id: uuid.UUID | str, *, progress: Progress | None = None) -> BulkJob:
    """Work the job's pending items batch by batch until none are left, the job is
    cancelled, or a batch raises (the job is then marked failed). Safe to call again
    on a job a crashed worker left running: it resumes at the first pending item."""
    from durable_workflow.admin.operations import perform_as
    from durable_workflow.admin.targets import Target

    while True:
        with database.atomic():
            job = BulkJob.objects.select_for_update().get(id=job_id)
            if job.status not in OPEN_STATUSES:
                return job
            items = list(
                BulkJobItem.objects.filter(job=job, state=BulkItemState.PENDING).order_by("id")[
                    : job.batch_size
                ]
            )
            now = clock.now()
            if not items:
                job.status = BulkJobStatus.DONE
                job.finished_at = job.updated_at = now
                job.started_at = job.started_at or now
                job.save(update_fields=["status", "finished_at", "updated_at", "started_at"])
                break
            if job.status == BulkJobStatus.QUEUED:
                job.status = BulkJobStatus.RUNNING
                job.started_at = now
            job.batches += 1
            data = {**job.options, "reason": job.reason}
            spaces = dict(
                WorkflowRun.objects.filter(
                    id__in=[i.run_id for i in items if i.run_id]
                ).values_list("id", "namespace")
            )
            for item in items:
                space = (spaces.get(item.run_id) if item.run_id else None) or namespaces.default()
                target = Target(item.instance_id, item.run_id, space)
                try:
                    with database.atomic():  # one run's failure leaves the batch usable
                        outcome = perform_as(
                            job.operation,
                            target,
                            data,
                            operator=job.operator,
                            request_id=f"bulk:{job.id}:{item.id}",
                        )
                except Exception as exc:
                    item.state = BulkItemState.FAILED
                    item.outcome = "error"
                    item.detail = f"{type(exc).__name__}: {exc}"[:2000]
                    job.failed += 1
                else:
                    item.outcome = outcome.outcome[:64]
                    item.detail = (outcome.rejection_reason or outcome.detail or "")[:2000]
                    if outcome.accepted:
                        item.state = BulkItemState.DONE
                        job.done += 1
                    else:
                        item.state = BulkItemState.SKIPPED
                        job.skipped += 1
                item.batch = job.batches
                _within_batch(job, item)
            BulkJobItem.objects.bulk_update(items, ["state", "outcome", "detail", "batch"])
            job.updated_at = clock.now()
            job.save()
        if progress is not None:
            progress(job)
        _between_batches(job)
    if progress is not None:
        progress(job)
    logger.info(
        "bulk job %s %s: %d done, %d skipped, %d failed in %d batches",
        job.id,
        job.status,
        job.done,
        job.skipped,
        job.failed,
        job.batches,
        extra={"bulk_job_id": str(job.id), "operation": job.operation},
    )
    return job


def stalled_after() -> float:
    return max(1.0, float(get_settings().BULK_STALLED_AFTER_SECONDS))


def stalled(*, now: dt.datetime | None = None) -> QuerySet[BulkJob]:
    """Open jobs whose progress has not moved for ``BULK_STALLED_AFTER_SECONDS``: their
    worker died or their message was lost (a batch writes ``updated_at``)."""
    since = (now or clock.now()) - dt.timedelta(seconds=stalled_after())
    return BulkJob.objects.filter(status__in=OPEN_STATUSES, updated_at__lte=since)


def resend_stalled(*, now: dt.datetime | None = None, limit: int = 100) -> list[str]:
    """Send the message of each stalled job again (the repair pass); the ids sent.

    A job is claimed by moving its ``updated_at`` to ``now`` only if no one moved it
    meanwhile, so two repair passes send it once; it is sent again only after
    another ``BULK_STALLED_AFTER_SECONDS`` without progress."""
    now = now or clock.now()
    sent = []
    rows = stalled(now=now).order_by("updated_at").values_list("id", "updated_at")
    for job_id, updated_at in rows[:limit]:
        claimed = BulkJob.objects.filter(
            id=job_id, status__in=OPEN_STATUSES, updated_at=updated_at
        ).update(updated_at=now)
        if not claimed:
            continue
        try:
            send(str(job_id))
        except Exception:
            # Not sent: leave it stalled for the next pass.
            BulkJob.objects.filter(id=job_id, updated_at=now).update(updated_at=updated_at)
            raise
        logger.warning(
            "bulk job %s made no progress since %s: its task message was sent again",
            job_id,
            updated_at.isoformat(),
            extra={"bulk_job_id": str(job_id)},
        )
        sent.append(str(job_id))
    return sent


def fail(job_id: uuid.UUID | str, error: str) -> None:
    now = clock.now()
    BulkJob.objects.filter(id=job_id, status__in=OPEN_STATUSES).update(
        status=BulkJobStatus.FAILED, error=error[:4000], finished_at=now, updated_at=now
    )


@shared_task(name=BULK_TASK, acks_late=True, ignore_result=True, reject_on_worker_lost=True)
def run_bulk_job(job_id: str) -> str:
    """The Celery side: process the job; a worker lost mid-job gets the message again
    (``acks_late``) and resumes it."""
    try:
        job = process(job_id)
    except BulkJob.DoesNotExist:
        return "missing"
    except Exception as exc:
        logger.exception("bulk job %s failed", job_id, extra={"bulk_job_id": job_id})
        fail(job_id, f"{type(exc).__name__}: {exc}")
        raise
    return str(job.status)


def _resend_stalled_count(now: dt.datetime) -> int:
    return len(resend_stalled(now=now))


repair.set_bulk_job_resender(_resend_stalled_count)
