"""The admin, for the ``aged`` scenario's page timings (only the harness process serves it)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
