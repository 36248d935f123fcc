"""Rebuilding recorded failures: registered keys and aliases, loaded classes, never an import.

Issue 18, item 6: a failure's ``exception_class`` comes from history, which can
come from a bundle someone else wrote. It once named a module to import and a
class to subclass; now it is only looked up, and making the rebuilt class runs
none of the original class's code.
"""

from __future__ import annotations

import abc
import gc
import sys
from collections.abc import Iterator

import pytest

from durable_workflow.engine import exception_types, failures
from durable_workflow.engine.exception_types import ExceptionTypes
from durable_workflow.exceptions import ActivityFailed, UnresolvedFailureError

HOOK_CALLS: list[str] = []


class Hooked(Exception):
    """A loaded class whose subclassing and construction have side effects."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        HOOK_CALLS.append(f"subclassed {cls.__name__}")
        super().__init_subclass__(**kwargs)

    def __new__(cls, *args: object, **kwargs: object) -> Hooked:
        HOOK_CALLS.append("constructed")
        return super().__new__(cls, *args)


class Declined(Exception):
    type_key = "tests.unit.card-declined"


class SoftDeclined(Declined):
    """Inherits a type_key but does not declare one."""


class Moved(Exception):
    pass


class WithMeta(Exception, metaclass=abc.ABCMeta):
    pass


def payload(exception_class: str, exception_type: str | None = None) -> dict[str, object]:
    return {
        "message": "no",
        "exception_class": exception_class,
        "exception_type": exception_type or exception_class,
    }


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    HOOK_CALLS.clear()
    previous = exception_types.configured()
    yield
    exception_types.configure(previous)


@pytest.fixture
def hostile_module(tmp_path, monkeypatch) -> str:
    """A module on sys.path that records being imported (it must never be)."""
    marker = tmp_path / "imported"
    (tmp_path / "dw_hostile_module.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
        "class Boom(Exception):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "dw_hostile_module", raising=False)
    yield str(marker)
    assert not (tmp_path / "imported").exists(), "the module named by a failure was imported"


def test_a_class_path_never_imports_its_module(hostile_module):
    with pytest.raises(UnresolvedFailureError) as info:
        failures.rebuild(ActivityFailed, payload("dw_hostile_module.Boom"))
    assert info.value.exception_class == "dw_hostile_module.Boom"
    assert "dw_hostile_module" not in sys.modules


def test_nested_and_dotted_paths_never_import_either(hostile_module):
    for path in ("dw_hostile_module.sub.Boom", "dw_hostile_module", "os.path.Boom"):
        with pytest.raises(UnresolvedFailureError):
            failures.rebuild(ActivityFailed, payload(path))


def test_a_loaded_class_is_rebuilt_without_running_its_code():
    error = failures.rebuild(ActivityFailed, payload(f"{__name__}.Hooked"))
    assert isinstance(error, Hooked) and isinstance(error, ActivityFailed)
    assert str(error) == "no"
    assert HOOK_CALLS == []  # neither __init_subclass__ nor __new__ ran
    assert type(error).__qualname__ == "Hooked"


def test_module_getattr_is_not_consulted(monkeypatch):
    module = type(sys)("dw_lazy_module")
    calls: list[str] = []

    def lazy(name: str) -> type:
        calls.append(name)
        return Moved

    module.__getattr__ = lazy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dw_lazy_module", module)
    with pytest.raises(UnresolvedFailureError):
        failures.rebuild(ActivityFailed, payload("dw_lazy_module.Anything"))
    assert calls == []


@pytest.mark.parametrize(
    "path",
    [
        "builtins.object",  # not an exception
        "builtins.KeyboardInterrupt",  # not an Exception
        f"{__name__}.WithMeta",  # a metaclass would run code to subclass it
        f"{__name__}.payload",  # a function
        f"{__name__}.HOOK_CALLS",
        "sys.modules",
    ],
)
def test_only_plain_exception_classes_are_rebuilt(path):
    assert type(failures.rebuild(ActivityFailed, payload(path))) is ActivityFailed


def test_builtin_exceptions_resolve():
    assert isinstance(failures.rebuild(ActivityFailed, payload("builtins.ValueError")), ValueError)


def test_a_declared_type_key_survives_a_move():
    recorded = payload("old.location.Declined", "tests.unit.card-declined")
    error = failures.rebuild(ActivityFailed, recorded)
    assert isinstance(error, Declined)
    assert error.exception_class == "old.location.Declined"  # the record is kept as it was


def test_failures_are_recorded_under_their_own_type_key_only():
    assert failures.describe(Declined("x")).exception_type == "tests.unit.card-declined"
    soft = failures.describe(SoftDeclined("x"))
    assert soft.exception_type == f"{__name__}.SoftDeclined"  # not the parent's key
    assert isinstance(failures.rebuild(ActivityFailed, payload(soft.exception_class)), SoftDeclined)


def test_configured_type_keys_and_class_aliases():
    exception_types.configure(
        ExceptionTypes(
            by_type_key={"billing.moved": Moved},
            by_old_path={"billing.errors.OldName": Moved},
        )
    )
    assert failures.describe(Moved("x")).exception_type == "billing.moved"
    by_key = failures.rebuild(ActivityFailed, payload("somewhere.Gone", "billing.moved"))
    by_alias = failures.rebuild(ActivityFailed, payload("billing.errors.OldName"))
    assert isinstance(by_key, Moved) and isinstance(by_alias, Moved)


def test_a_type_key_wins_over_the_class_path():
    exception_types.configure(ExceptionTypes(by_type_key={"billing.moved": Moved}))
    recorded = payload(f"{__name__}.Declined", "billing.moved")
    assert type(failures.rebuild(ActivityFailed, recorded)).__mro__[2] is Moved


def test_a_type_key_two_classes_declare_resolves_to_neither():
    class Twin(Exception):
        type_key = "tests.unit.card-declined"

    exception_types.refresh()  # a class made in a function, after the last scan
    try:
        with pytest.raises(UnresolvedFailureError):  # ambiguous: neither class stands for it
            failures.rebuild(ActivityFailed, payload("gone.Twin", "tests.unit.card-declined"))
    finally:
        del Twin
        gc.collect()  # a class lives in a reference cycle
        exception_types.refresh()
    assert isinstance(
        failures.rebuild(ActivityFailed, payload("x", "tests.unit.card-declined")), Declined
    )


@pytest.mark.parametrize("bad", [object, KeyboardInterrupt, WithMeta, "x"])
def test_the_maps_hold_only_plain_exception_classes(bad):
    with pytest.raises(TypeError):
        ExceptionTypes(by_type_key={"k": bad})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "path",
    ["", "tests.unit.test_exception_types.test_x.<locals>.Boom"],
)
def test_a_failure_with_no_class_to_look_up_is_the_base_error(path):
    """No class recorded, or one made in a function (it has no name to look up)."""
    assert type(failures.rebuild(ActivityFailed, payload(path))) is ActivityFailed
