"""The signed string of webhook signatures, and the reference's worked example."""

from __future__ import annotations

import pytest

from durable_workflow.webhooks import canonical_string, sign
from durable_workflow.webhooks.signing import SignatureRefused, parse_header
from tests.integration.helpers import doc_block


def test_the_reference_worked_example_runs():
    exec(doc_block("reference/webhooks.md", "python", "durable-workflow-webhook.v1"), {})


def test_each_part_of_the_request_changes_the_signature():
    base = {"timestamp": 1, "method": "POST", "path": "/w/a", "body": b"{}", "nonce": "n"}
    variants = [
        {"timestamp": 2},
        {"method": "GET"},
        {"path": "/w/b"},
        {"path": "/w/a?x=1"},
        {"body": b"{ }"},
        {"nonce": "m"},
        {"nonce": ""},
    ]
    signed = {sign("s", **base)}
    for change in variants:
        signed.add(sign("s", **{**base, **change}))
    assert len(signed) == len(variants) + 1


def test_the_signed_string_has_six_lines_and_an_empty_nonce_line():
    one = canonical_string(timestamp=1, method="POST", path="/a", body=b"", nonce="")
    assert one.split("\n")[2] == ""
    assert len(one.split("\n")) == 6


@pytest.mark.parametrize("legacy", ["ab" * 32, "sha256=" + "ab" * 32, "SHA256=" + "AB" * 32])
def test_body_only_signatures_are_named_outdated(legacy):
    with pytest.raises(SignatureRefused) as refused:
        parse_header(legacy)
    assert refused.value.reason == "signature_outdated"
