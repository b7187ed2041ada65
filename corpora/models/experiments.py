"""Experiments: variants of a service's profile run side by side on a sandbox."""

from __future__ import annotations

from django.db import models

from corpora.models.corpora import Corpus


class Experiment(models.Model):
    """A profile experiment (docs/decisions/profile-experiments.md): the papers of a pair (`corpus`, `service`)
    that were not error-free, carved into the sandbox corpus `sandbox`, converted by each variant's service.
    The names are kept beside the references, which a deletion of the corpus, the sandbox or the service sets
    to null (corpora.pairs.data_purge), so the experiment stays in the history."""

    name = models.CharField(max_length=100, unique=True)
    corpus = models.ForeignKey(Corpus, null=True, on_delete=models.DO_NOTHING, related_name="+")
    service = models.ForeignKey("services.Service", null=True, on_delete=models.DO_NOTHING, related_name="+")
    sandbox = models.ForeignKey(Corpus, null=True, on_delete=models.DO_NOTHING, related_name="+")
    corpus_name = models.CharField(max_length=100)
    service_name = models.CharField(max_length=100)
    # The pair's service profile when the experiment started (conversion.profiles.Profile.as_json): the base
    # each variant's changes were applied over.
    profile = models.JSONField()
    actor = models.CharField(max_length=100)
    # The job that carves the sandbox and activates the variants (jobs.models.Job.uuid).
    job_uuid = models.UUIDField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class ExperimentVariant(models.Model):
    """One variant of an experiment: its name, the options it changes over the experiment's profile, and the
    service registered with the result (named `<experiment>.<variant>`), activated on the sandbox."""

    experiment = models.ForeignKey(Experiment, on_delete=models.DO_NOTHING, related_name="variants")
    name = models.CharField(max_length=100)
    changes = models.JSONField()
    service = models.ForeignKey("services.Service", null=True, on_delete=models.DO_NOTHING, related_name="+")
    service_name = models.CharField(max_length=100)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["experiment", "name"], name="experimentvariant_unique_name")]

    def __str__(self) -> str:
        return f"{self.experiment_id}/{self.name}"
