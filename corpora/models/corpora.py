"""Corpora (incl. sandboxes), their documents and the activations of services on them."""

from __future__ import annotations

from django.db import models
from django.db.models import F
from django.db.models.functions import Collate, Lower

from corpora.choices import CorpusState


class Corpus(models.Model):
    name = models.CharField(max_length=100, unique=True)
    path = models.CharField(max_length=4096)
    description = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=CorpusState.choices, default=CorpusState.IMPORTING)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="sandboxes")
    # A sandbox's SandboxRequest as it was accepted (its parent's path is its path); null on an imported corpus.
    condition = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One entry of the corpus directory: a sub-directory, a lone .tex, a .zip, a .tar.gz or a .gz."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="documents")
    name = models.CharField(max_length=255)
    entry = models.CharField(max_length=1024)
    kind = models.CharField(max_length=10)
    main_file = models.CharField(max_length=1024, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["corpus", "name"], name="document_unique_name"),
            models.UniqueConstraint(fields=["corpus", "entry"], name="document_unique_entry"),
        ]
        indexes = [
            # A corpus's document list, in the order of its names folded to lower case, and the search of
            # a name prefix in it (LIKE 'prefix%' on a "C"-collated key is a range of this index), with
            # the name itself breaking ties (docs/decisions/reading-converted-papers.md).
            models.Index(F("corpus"), Collate(Lower("name"), "C"), F("name"), name="document_name_folded"),
        ]

    def __str__(self) -> str:
        return self.name


class Activation(models.Model):
    """A service registered on a corpus."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="activations")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="activations")
    actor = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "service"], name="activation_unique_pair")]

    def __str__(self) -> str:
        return f"{self.service_id} on {self.corpus_id}"
