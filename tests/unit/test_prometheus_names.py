"""The metric names the engine exposes, the docs' reference table and the Grafana dashboard
agree (issue 25, item 2)."""

from __future__ import annotations

import json
import re

from prometheus_client import Counter, Histogram

from durable_workflow.contrib.prometheus import collector, metrics
from tests.docs.blocks import DOCS

PAGE = DOCS / "how-to" / "metrics.md"
DASHBOARD = DOCS / "assets" / "grafana-dashboard.json"


def exposed() -> dict[str, str]:
    """Family name (as scraped) -> type."""
    names = {}
    for value in vars(metrics).values():
        if isinstance(value, Counter | Histogram):
            for family in value.describe():
                suffix = "_total" if family.type == "counter" else ""
                names[family.name + suffix] = family.type
    for family in collector._families({}, {}):
        names[family.name] = family.type
    names["durable_workflow_database_collector_up"] = "gauge"
    return names


def test_names_follow_the_conventions():
    for name, kind in exposed().items():
        assert name.startswith("durable_workflow_")
        assert name.endswith("_total") == (kind == "counter"), name
        if "duration" in name or "schedule_to_start" in name or "age" in name:
            assert name.endswith("_seconds"), name


def test_the_reference_table_lists_every_metric():
    listed = set(re.findall(r"^\| `(durable_workflow_\w+)` \|", PAGE.read_text(), re.MULTILINE))
    assert listed == set(exposed())


def test_the_dashboard_queries_only_metrics_that_exist():
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    used = {name for expr in expressions for name in re.findall(r"durable_workflow_\w+", expr)}
    known = set(exposed())
    for name in used:
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        assert name in known or base in known, name
    # Every metric has a panel.
    assert {re.sub(r"_(bucket|count|sum)$", "", n) for n in used} == known
