"""Optional integrations with third-party tools, each behind its own extra."""
