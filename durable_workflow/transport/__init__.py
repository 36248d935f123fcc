"""How task messages travel: Celery in production (``celery.py``), its eager mode, and one
task run in this process (``in_process.py``, which the testing kit's inline runner uses)."""
