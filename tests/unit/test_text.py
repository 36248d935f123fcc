"""Storable text (escape, never drop) and the checks names and values pass at the boundary."""

from __future__ import annotations

import pytest

from durable_workflow import InvalidValueError
from durable_workflow.text import check, check_json, problem, storable, text_of


@pytest.mark.parametrize(
    "raw, stored",
    [
        ("plain", "plain"),
        ("é ✓ 中", "é ✓ 中"),
        ("a\x00b", "a\\x00b"),
        ("lone \udcff here", "lone \\udcff here"),
        ("both\x00\ud800", "both\\x00\\ud800"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
    ],
)
def test_storable_escapes_what_a_database_refuses_and_keeps_the_rest(raw, stored):
    assert storable(raw) == stored
    storable(raw).encode("utf-8")


def test_text_of_an_object_whose_str_raises_describes_it():
    class Boom:
        def __str__(self) -> str:
            raise KeyError("nope")

    assert text_of(Boom()) == "<unprintable Boom: str() raised KeyError>"
    assert text_of(ValueError("x\x00")) == "x\\x00"


@pytest.mark.parametrize(
    "value, reason",
    [
        ("ok-name", None),
        ("", "must not be empty"),
        ("x" * 11, "must be at most 10 characters (got 11)"),
        ("a\x00", "must not contain a NUL byte (position 1)"),
        ("\udcffa", "must not contain a lone surrogate (position 0)"),
        ("a\x07", "must not contain control character '\\x07' (position 1)"),
        (42, "must be a string, not int"),
    ],
)
def test_problem_names_what_is_wrong(value, reason):
    assert problem(value, max_length=10) == reason


def test_check_raises_a_typed_error_with_field_and_reason():
    with pytest.raises(InvalidValueError) as raised:
        check("a\x00", field="signal name", max_length=10)
    assert isinstance(raised.value, ValueError)
    assert (raised.value.field, raised.value.reason) == (
        "signal name",
        "must not contain a NUL byte (position 1)",
    )
    assert check("", field="reason", max_length=5, allow_empty=True) == ""


@pytest.mark.parametrize(
    "value, field",
    [
        ({"a": ["x", {"b": "\x00"}]}, "memo.a[1].b"),
        ({"k\udcff": 1}, "memo key 'k\\\\udcff'"),
        ({"n": float("nan")}, "memo.n"),
        ({"o": object()}, "memo.o"),
        ({1: "int key"}, "memo"),
    ],
)
def test_check_json_names_the_path_it_refuses(value, field):
    with pytest.raises(InvalidValueError) as raised:
        check_json(value, field="memo")
    assert raised.value.field == field


def test_check_json_accepts_plain_data_and_refuses_deep_nesting():
    plain = {"a": [1, 2.5, True, None, "text\nwith \x1b escape"], "b": {"c": "é"}}
    assert check_json(plain, field="memo") is plain
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(InvalidValueError):
        check_json(deep, field="memo")
