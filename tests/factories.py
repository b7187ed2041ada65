from __future__ import annotations

import factory

from jobs.models import Job, JobState


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    kind = "test_count"
    state = JobState.QUEUED
    actor = "tester"
    params = factory.LazyFunction(dict)
