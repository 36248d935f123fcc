"""Instance ids as file names: never '.', '..', hidden, an option, or a path; reversible."""

from __future__ import annotations

import pytest

from durable_workflow.exceptions import InvalidInstanceIdError
from durable_workflow.ids import instance_file_name, instance_id_from_file_name

IDS = [".", "..", "...", ".env", "-", "-rf", "--help", "a:b", ":", "a" * 191, ":" * 191]


@pytest.mark.parametrize("instance_id", [*IDS, "order-123", "A.b_c-d:e"])
def test_names_are_safe_and_reversible(instance_id):
    name = instance_file_name(instance_id)
    assert name not in (".", "..")
    assert name[0] not in ".-"
    assert not set(name) & set("/\\:\x00")
    assert len(name) <= len(instance_id) + 1 <= 192
    assert instance_id_from_file_name(name) == instance_id


def test_distinct_ids_get_distinct_names():
    names = {instance_file_name(instance_id) for instance_id in IDS}
    assert len(names) == len(IDS)


@pytest.mark.parametrize("hostile", ["a/b", "../etc", "a\x00b", "", "x" * 192, "a b", "=x", "a+b"])
def test_invalid_ids_never_become_names(hostile):
    with pytest.raises(InvalidInstanceIdError):
        instance_file_name(hostile)
