"""Seams the testing kit uses to replace activity code in fake mode.

Production code never sets these. ``activity_mocks`` maps an activity type key
to a replacement: a callable ``(context, *args) -> result`` or a plain value.
"""

from __future__ import annotations

from typing import Any

activity_mocks: dict[str, Any] = {}
