"""What an operator action acts on (a run or an instance's current run), what it came to,
and the reason form every action asks for: the parts ``operations`` and ``rewind`` share."""

from __future__ import annotations

import dataclasses
import uuid

from django import forms


@dataclasses.dataclass(frozen=True)
class Target:
    instance_id: str
    run_id: uuid.UUID | None = None
    namespace: str = "default"

    def __str__(self) -> str:
        return self.instance_id if self.run_id is None else f"{self.instance_id} ({self.run_id})"


@dataclasses.dataclass(frozen=True)
class Outcome:
    target: Target
    accepted: bool
    outcome: str
    rejection_reason: str | None = None
    #: What the operator asked to see (a query's answer), as text.
    detail: str | None = None


class ReasonForm(forms.Form):
    reason = forms.CharField(
        label="Reason",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="Recorded on the command, for the audit trail.",
    )
