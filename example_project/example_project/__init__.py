# Load the Celery app with Django so task dispatch from web/management code uses it.
from example_project.celery import app as celery_app

__all__ = ["celery_app"]
