"""Django model instances travel as identifiers (``ModelRef``), never as rows.

A payload stores ``{"$dw": "model", "app_label", "model", "pk", "db"}``. An
activity (or client code) that declares the model class gets the row, fetched
again when it receives the value; a workflow body only ever gets the
``ModelRef`` itself, because a body must not query the database. Django is
imported only when a model value is actually met, so the engine stays free of it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from durable_workflow.exceptions import ModelInstanceNotFoundError


class SavedModel(Protocol):
    """What a Django model instance offers here (the engine never imports Django)."""

    pk: Any
    _meta: Any
    _state: Any


M = TypeVar("M", bound=SavedModel)


@dataclass(frozen=True)
class ModelRef(Generic[M]):
    """Which row of which model: app label, model name, primary key and database alias.

    Annotate a workflow parameter as ``ModelRef[Order]``; pass an ``Order`` (or
    ``ModelRef.of(order)``) when starting it, and hand the ref to an activity that
    declares ``order: Order`` to work with the row.
    """

    app_label: str
    model_name: str
    pk: Any
    using: str = "default"

    @classmethod
    def of(cls, instance: M) -> ModelRef[M]:
        """The identifier of a saved model instance."""
        meta = instance._meta
        if instance.pk is None:
            raise ValueError(f"{meta.label} has no primary key yet")
        return ModelRef(
            meta.app_label, meta.model_name, instance.pk, instance._state.db or "default"
        )

    @property
    def label(self) -> str:
        return f"{self.app_label}.{self.model_name}"

    def model(self) -> type[M]:
        """The model class, from Django's app registry (never imported by path)."""
        registry: Any = sys.modules.get("django.apps")  # loaded wherever models exist
        if registry is None:
            raise LookupError(f"{self.label}: Django is not set up in this process")
        cls: type[M] = registry.apps.get_model(self.app_label, self.model_name)
        return cls

    def fetch(self, model: type[M] | None = None) -> M:
        """Read the row now; ``ModelInstanceNotFoundError`` when it is gone."""
        cls: Any = model or self.model()
        try:
            row: M = cls._default_manager.db_manager(self.using).get(pk=self.pk)
        except cls.DoesNotExist:
            raise ModelInstanceNotFoundError(
                f"{self.label} with pk={self.pk!r} (database {self.using!r}) no longer exists",
                model=self.label,
                pk=self.pk,
                using=self.using,
            ) from None
        return row


def is_model_instance(value: Any) -> bool:
    """True for a Django model instance; Django need not be imported for the answer."""
    models = sys.modules.get("django.db.models")
    return models is not None and isinstance(value, models.Model)


def is_model_class(hint: Any) -> bool:
    models = sys.modules.get("django.db.models")
    return models is not None and isinstance(hint, type) and issubclass(hint, models.Model)


def matches(ref: ModelRef[Any], model: type) -> bool:
    """Whether a stored identifier names ``model`` (or the concrete model it proxies)."""
    meta: Any = model._meta  # type: ignore[attr-defined]
    labels = {meta.label_lower, meta.concrete_model._meta.label_lower}
    return ref.label in labels
