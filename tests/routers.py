"""A router that keeps the engine's tables on their own database (``workflows``) and
everything else on ``default``: the multi-database setup the engine supports."""

from __future__ import annotations

from typing import Any

ENGINE_APP = "durable_workflow"
ENGINE_ALIAS = "workflows"


class EngineRouter:
    def _alias(self, model: Any) -> str:
        return ENGINE_ALIAS if model._meta.app_label == ENGINE_APP else "default"

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return self._alias(model)

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return self._alias(model)

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return self._alias(type(obj1)) == self._alias(type(obj2))

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return (db == ENGINE_ALIAS) == (app_label == ENGINE_APP)
