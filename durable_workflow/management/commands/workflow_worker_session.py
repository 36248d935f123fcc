"""``manage.py workflow_worker_session``: the worker-session verbs and the operator list.

``create`` / ``heartbeat`` / ``close`` act for a registered worker (``--worker-id``);
``list`` and ``show`` print the operator view. Every answer is the contract's JSON
document; a refused verb exits with status 1.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.executor import session_documents, sessions


class Command(BaseCommand):
    help = "Create, heartbeat or close a worker session for a worker; list or show sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True)
        create = verbs.add_parser("create", help="create (or reacquire) a session for a worker")
        create.add_argument("session_id")
        create.add_argument("--worker-id", required=True)
        create.add_argument("--queue")
        create.add_argument("--connection")
        create.add_argument(
            "--requirement", action="append", default=[], help="capability (repeatable)"
        )
        create.add_argument("--lease-seconds", type=int)
        create.add_argument("--ttl-seconds", type=int)
        create.add_argument("--max-concurrent-activities", type=int)
        create.add_argument("--no-reacquire", action="store_true")
        beat = verbs.add_parser("heartbeat", help="renew the holder's lease")
        beat.add_argument("session_id")
        beat.add_argument("--worker-id", required=True)
        beat.add_argument("--lease-seconds", type=int)
        close = verbs.add_parser("close", help="close a session held by a worker")
        close.add_argument("session_id")
        close.add_argument("--worker-id", required=True)
        listing = verbs.add_parser("list", help="sessions and per-status counts")
        listing.add_argument("--status", choices=session_documents.STATUSES)
        listing.add_argument("--limit", type=int, default=100)
        show = verbs.add_parser("show", help="one session")
        show.add_argument("session_id")
        verbs.add_parser("contract", help="the worker-session runtime contract")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        refused = False
        if verb == "create":
            request = {
                "session_id": options["session_id"],
                "worker_id": options["worker_id"],
                "queue": options["queue"],
                "connection": options["connection"],
                "requirements": options["requirement"],
                "lease_seconds": options["lease_seconds"],
                "ttl_seconds": options["ttl_seconds"],
                "max_concurrent_activities": options["max_concurrent_activities"],
                "allow_reacquire_after_failure": not options["no_reacquire"],
            }
            document = sessions.create({k: v for k, v in request.items() if v is not None})
        elif verb == "heartbeat":
            document = sessions.heartbeat(
                options["session_id"], options["worker_id"], lease_seconds=options["lease_seconds"]
            )
        elif verb == "close":
            document = sessions.close(options["session_id"], options["worker_id"])
        elif verb == "list":
            document = sessions.visibility(status=options["status"], limit=options["limit"])
        elif verb == "show":
            found = sessions.detail(options["session_id"])
            if found is None:
                raise CommandError(f"no worker session {options['session_id']!r}")
            document = found
        else:
            document = {"worker_sessions": session_documents.runtime_contract()}
        if "admitted" in document:
            refused = not document["admitted"]
        self.stdout.write(json.dumps(document, indent=2, sort_keys=True))
        if refused:
            raise CommandError(f"{verb} refused: {document['reason']}", returncode=1)
