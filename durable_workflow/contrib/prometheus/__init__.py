"""Prometheus metrics (the ``prometheus`` extra): docs/how-to/metrics.md.

``metrics``: the counters and histograms the engine updates (``PROMETHEUS_METRICS``);
``recorder``: how engine events update them; ``collector``: gauges read from the
database at scrape time; ``registry``: what a scrape reads, in one process or many
(``PROMETHEUS_MULTIPROC_DIR``); ``views`` and ``urls``: the scrape endpoint.

Importing any of them without prometheus-client installed raises
``ConfigurationError`` saying which extra to install.
"""

from __future__ import annotations

import importlib.util

from durable_workflow.exceptions import ConfigurationError

if importlib.util.find_spec("prometheus_client") is None:
    raise ConfigurationError(
        "durable_workflow.contrib.prometheus needs prometheus-client: "
        "pip install 'durable-workflow[prometheus]'"
    )
