"""The pure replay engine: no Django, no Celery, only greenlets and data."""
