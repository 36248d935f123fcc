"""What type checkers see of a workflow or activity class: its ``handle()`` signature.

``dw.activity(ChargeCard, ...)`` is typed as taking ``type[Handles[P, R]]``: a
checker matches ``ChargeCard.handle`` against the protocol, so ``P`` becomes its
parameters (checked at the call) and ``R`` its return type (what the call gives).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

if TYPE_CHECKING:
    # Defaults (PEP 696) let ``class Charge(Activity)`` stay bare under ``mypy --strict``.
    from typing_extensions import ParamSpec as DefaultedParamSpec
    from typing_extensions import TypeVar as DefaultedTypeVar

    HandleP = DefaultedParamSpec("HandleP", default=...)
    HandleR = DefaultedTypeVar("HandleR", default=Any)
else:
    HandleP = ParamSpec("HandleP")
    HandleR = TypeVar("HandleR")


class Handles(Protocol[P, R_co]):
    """A class whose instances have ``handle(*P) -> R``."""

    def handle(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


class AsyncHandles(Protocol[P, R_co]):
    """A class whose instances have ``async def handle(*P) -> R`` (an async activity:
    the workflow receives the ``R``)."""

    def handle(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R_co]: ...


def bind_call(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> list[Any]:
    """Positional arguments for a durable call; keyword arguments move to their positions."""
    if not kwargs:
        return list(args)
    from durable_workflow.converter import handle_signature

    return handle_signature(cls if isinstance(cls, type) else None).bind(args, dict(kwargs), what)


def result_hint(cls: Any, result_type: Any) -> Any:
    """The declared result type of a call: ``result_type=`` first, else ``handle()``'s return."""
    if result_type is not None:
        return result_type
    from durable_workflow.converter import handle_signature

    return handle_signature(cls if isinstance(cls, type) else None).result
