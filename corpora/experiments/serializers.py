"""Profile experiment DTOs and the request body that starts one, shared by the screens and the API."""

from __future__ import annotations

from rest_framework import serializers

from config.api.fields import StrictCharField, validate_plain_name
from config.links import LinkField
from config.names import NAME_MAX
from corpora.experiments.actions import VARIANTS_MAX
from corpora.links import document_api_url, experiment_api_url
from services.serializers import ProfileSerializer


class VariantRequestSerializer(serializers.Serializer[object]):
    """A variant: its name and the options it changes over the pair's service profile."""

    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    changes = ProfileSerializer(
        required=False, default=dict,
        help_text="the profile options to change (preloads, switches, paths, engine, timeout_seconds, ...); no"
        " preset. Empty: the pair's profile as it is, a control",
    )  # fmt: skip


class ExperimentRequestSerializer(serializers.Serializer[object]):
    """ExperimentRequest: a pair and the variants to try on its papers that are not error-free."""

    corpus = StrictCharField(max_length=NAME_MAX, help_text="the pair's corpus")
    service = StrictCharField(max_length=NAME_MAX, help_text="the pair's service, activated on the corpus")
    name = StrictCharField(
        max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False,
        help_text="the experiment's name, which its sandbox corpus takes; each variant's service is <name>.<variant>",
    )  # fmt: skip
    variants: serializers.ListSerializer[object] = serializers.ListSerializer(
        child=VariantRequestSerializer(), min_length=1, max_length=VARIANTS_MAX
    )


class ExperimentSerializer(serializers.Serializer[object]):
    """An experiment as listed."""

    name = serializers.CharField()
    corpus = serializers.CharField(help_text="the pair's corpus")
    service = serializers.CharField(help_text="the pair's service")
    sandbox = serializers.CharField(allow_null=True, help_text="the sandbox corpus; null once it is deleted")
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()
    variants = serializers.ListField(child=serializers.CharField(), help_text="the variants' names")
    job = serializers.CharField(allow_null=True, help_text="the uuid of the job that carves and activates")
    state = serializers.CharField(allow_null=True, help_text="that job's state")
    url = LinkField(lambda record: experiment_api_url(record.name))


class ExperimentPaperSerializer(serializers.Serializer[object]):
    name = serializers.CharField(help_text="the document's name")
    report = LinkField(
        lambda paper: document_api_url(paper.sandbox, paper.service, paper.name) if paper.sandbox else "",
        help_text="its document report under the variant, on the sandbox",
    )


class VariantResultSerializer(serializers.Serializer[object]):
    rank = serializers.IntegerField(help_text="1 for the variant that fixed most papers (then broke fewest)")
    name = serializers.CharField()
    service = serializers.CharField(help_text="the variant's service, activated on the sandbox")
    changes = serializers.DictField(help_text="the profile options it changed over the pair's (ProfileRequest's keys)")
    done = serializers.IntegerField(help_text="its tasks with a result")
    total = serializers.IntegerField(help_text="its tasks")
    fixed = serializers.IntegerField(help_text="papers error or fatal for the pair, no_problem or warning here")
    broken = serializers.IntegerField(help_text="papers with a worse status here than for the pair")
    fixed_papers = ExperimentPaperSerializer(many=True, help_text="the papers fixed, first by name")
    broken_papers = ExperimentPaperSerializer(many=True, help_text="the papers broken, first by name")


class ExperimentDetailSerializer(serializers.Serializer[object]):
    """One experiment with its variants ranked."""

    experiment = ExperimentSerializer()
    profile = ProfileSerializer(help_text="the pair's service profile when it started: what the variants change")
    progress_current = serializers.IntegerField(allow_null=True, help_text="the job's steps done")
    progress_total = serializers.IntegerField(allow_null=True, help_text="the job's steps: the carve and each variant")
    message = serializers.CharField(allow_blank=True, help_text="the job's last message")
    papers = serializers.IntegerField(help_text="the papers in the sandbox")
    papers_shown = serializers.IntegerField(help_text="at most this many papers are listed behind each number")
    variants = VariantResultSerializer(many=True)
