"""The Celery application: Redis broker, tasks discovered in every app's tasks.py."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("ccs")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
