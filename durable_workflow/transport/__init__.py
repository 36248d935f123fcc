"""How task messages travel: Celery in production, inline in the testing kit."""
