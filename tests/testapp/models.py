from django.db import models


class Invocation(models.Model):
    """Activities record each call here so tests can count them across processes."""

    name = models.CharField(max_length=100)
    key = models.CharField(max_length=200, blank=True, default="")
    attempt = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
