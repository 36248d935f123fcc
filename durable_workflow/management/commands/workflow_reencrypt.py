"""``manage.py workflow_reencrypt``: rewrite stored payloads under the current encryption key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable_workflow.exceptions import PayloadCodecError
from durable_workflow.operations.reencrypt import reencrypt


class Command(BaseCommand):
    help = (
        "Re-encrypt stored payloads written under a retired key with the current key "
        "(PAYLOAD_ENCRYPTION_KEY_ID), in batches; safe to interrupt and run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be rewritten, write nothing"
        )
        parser.add_argument("--batch-size", type=int, default=500, help="rows per transaction")
        parser.add_argument(
            "--after",
            default=None,
            metavar="APP.MODEL.FIELD",
            help="resume after this column (as printed by an earlier pass)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            progress = reencrypt(
                batch_size=options["batch_size"],
                dry_run=options["dry_run"],
                after=options["after"],
                report=lambda line: self.stderr.write(line),
            )
        except (PayloadCodecError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        keys = ", ".join(f"{key}: {count}" for key, count in sorted(progress.by_key.items()))
        verb = "would rewrite" if options["dry_run"] else "rewrote"
        self.stdout.write(
            f"{verb} {sum(progress.by_key.values())} payloads "
            f"({keys or 'none under a retired key'}) in "
            f"{progress.rows_rewritten if not options['dry_run'] else '-'} rows; "
            f"{progress.rows_scanned} rows scanned"
        )
        for error in progress.errors:
            self.stderr.write(f"not rewritten: {error}")
        if progress.errors:
            raise CommandError(f"{len(progress.errors)} payloads could not be read")
