"""Writes of profile experiments (docs/decisions/profile-experiments.md): start one, journaled, and its job,
which carves the sandbox and activates every variant on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from accounts.actions import journaled
from accounts.choices import Action
from config.errors import BadRequest, Conflict, NotFound
from config.names import NAME_RULE, name_check, name_is_valid
from conversion.choices import TaskStatus
from conversion.profiles import profile_load
from corpora.actions.corpora import corpus_sandbox_run, service_activate_run
from corpora.choices import CorpusState
from corpora.models import Activation, Corpus, Experiment, ExperimentVariant, TaskCount
from corpora.queries.corpora import pair_get
from jobs.actions import job_enqueue
from jobs.choices import JobKinds
from jobs.models import Job
from jobs.runner import JobFailed
from services.actions import profile_checked, service_register

Progress = Callable[..., None]
Log = Callable[[str], None]

VARIANTS_MAX = 16
# The statuses of the pair's papers an experiment takes: those that are not error-free.
TROUBLED = ("error", "fatal")
TROUBLED_STATUSES = (TaskStatus.ERROR, TaskStatus.FATAL)


def variant_service_name(experiment: str, variant: str) -> str:
    """The service a variant is registered as."""
    return f"{experiment}.{variant}"


def _variants_check(experiment: str, base: dict[str, Any], variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each variant with its service's name and its profile (the base with its changes over it, checked as a
    service's profile is); BadRequest on the field `variants` naming the variant that cannot be."""

    def refuse(detail: str, variant: str = "", why: Any = None) -> BadRequest:
        errors = {"variants": {variant: why} if variant else [detail]}
        return BadRequest(detail, errors=errors)

    if not variants:
        raise refuse("An experiment needs at least one variant.")
    if len(variants) > VARIANTS_MAX:
        raise refuse(f"An experiment has at most {VARIANTS_MAX} variants.")
    checked, seen = [], set()
    for variant in variants:
        name, changes = variant["name"], variant.get("changes") or {}
        if name in seen:
            raise refuse(f"Two variants are named {name!r}.", name, ["named twice"])
        seen.add(name)
        if "preset" in changes:
            raise refuse(
                f"The variant {name!r} changes options of the pair's profile; a preset is no option.",
                name, {"preset": ["not an option: name the options to change"]},
            )  # fmt: skip
        service = variant_service_name(experiment, name)
        if not name_is_valid(service):
            raise refuse(f"The variant's service name {service!r} is not a valid name: {NAME_RULE}.", name, [NAME_RULE])
        try:
            profile = profile_checked({**base, **changes}, field="changes")
        except BadRequest as exc:
            raise refuse(f"The variant {name!r}: {exc.detail}", name, (exc.errors or {}).get("changes")) from None
        checked.append({"name": name, "changes": changes, "service": service, "profile": profile.as_json()})
    return checked


@journaled(Action.EXPERIMENT_START, target="{corpus}/{service}/{name}")
def experiment_start(
    *, corpus: str, service: str, name: str, variants: list[dict[str, Any]], actor: str, send: bool = True
) -> Job:
    """Start a profile experiment on a pair: its sandbox corpus (named as the experiment, state importing)
    reserved, one service registered per variant (the pair's profile with the variant's changes over it),
    and the job that carves the sandbox and activates the variants, in one transaction."""
    name_check(name)
    source, parent = pair_get(corpus, service)
    if parent.is_protected or not Activation.objects.filter(corpus=source, service=parent).exists():
        raise NotFound(f"The service {service!r} is not active on the corpus {corpus!r}.")
    if source.state == CorpusState.IMPORTING:
        raise Conflict(f"The corpus {corpus!r} is still importing; start an experiment once it has finished.")
    base = profile_load(parent.profile).as_json()
    checked = _variants_check(name, base, variants)
    troubled = TaskCount.objects.filter(corpus=source, service=parent, bucket__in=TROUBLED_STATUSES, count__gt=0)
    if not troubled.exists():
        raise Conflict(f"No paper of {corpus}/{service} has the status error or fatal: there is nothing to fix.")
    try:
        with transaction.atomic():
            sandbox = Corpus.objects.create(
                name=name, path=source.path, parent=source, condition={"service": service, "statuses": list(TROUBLED)},
                description=f"Experiment {name} on {corpus}/{service}",
            )  # fmt: skip
            experiment = Experiment.objects.create(
                name=name, corpus=source, service=parent, sandbox=sandbox, corpus_name=corpus, service_name=service,
                profile=base, actor=actor,
            )  # fmt: skip
            for variant in checked:
                registered = service_register(
                    name=variant["service"], actor=actor, profile=variant["profile"],
                    description=f"Variant {variant['name']} of the experiment {name} on {corpus}/{service}",
                )  # fmt: skip
                ExperimentVariant.objects.create(
                    experiment=experiment, name=variant["name"], changes=variant["changes"], service=registered,
                    service_name=registered.name,
                )  # fmt: skip
            job, _ = job_enqueue(
                kind=JobKinds.EXPERIMENT_RUN, actor=actor, params={"experiment_id": experiment.pk, "name": name},
                send=send,
            )  # fmt: skip
            Experiment.objects.filter(pk=experiment.pk).update(job_uuid=job.uuid)
    except IntegrityError as exc:
        taken = "An experiment" if Experiment.objects.filter(name=name).exists() else "A corpus"
        raise Conflict(f"{taken} named {name!r} exists already.") from exc
    return job


@dataclass(frozen=True)
class ExperimentStarted:
    """What an experiment's job made (its job result): the sandbox's documents, the variants converting on
    it and the TODO tasks created for them."""

    documents: int
    variants: int
    tasks: int


def experiment_run(*, experiment_id: int, progress: Progress, log: Log) -> ExperimentStarted:
    """The experiment's job: carve the sandbox (the pair's papers with the status error or fatal), then
    create each variant's TODO tasks on it and open its run; progress counts the carve and each variant.
    A variant already activated (an earlier attempt) is left as it is."""
    experiment = Experiment.objects.filter(pk=experiment_id).select_related("sandbox").first()
    sandbox = experiment.sandbox if experiment is not None else None
    if experiment is None or sandbox is None:
        raise JobFailed("The experiment or its sandbox was deleted before its job ran.")
    variants = list(ExperimentVariant.objects.filter(experiment=experiment, service__isnull=False))
    steps = 1 + len(variants)
    progress(0, steps, "carving the sandbox")
    if sandbox.state == CorpusState.IMPORTING:
        carved = corpus_sandbox_run(corpus_id=sandbox.pk, progress=_quiet, log=log)
        log(f"carved {carved.documents} papers of {experiment.corpus_name}/{experiment.service_name}")
    tasks = 0
    for step, variant in enumerate(variants, start=1):
        progress(step - 1, steps, f"activating {variant.name}")
        assert variant.service_id is not None  # the variants above are those with a service
        activation, created = Activation.objects.get_or_create(
            corpus_id=sandbox.pk, service_id=variant.service_id, defaults={"actor": experiment.actor}
        )
        if created:
            activated = service_activate_run(activation_id=activation.pk, progress=_quiet, log=log)
            tasks += activated.tasks
    progress(steps, steps, f"{len(variants)} variants converting")
    documents = Corpus.objects.get(pk=sandbox.pk).documents.count()
    return ExperimentStarted(documents=documents, variants=len(variants), tasks=tasks)


def _quiet(*args: Any, **kwargs: Any) -> None:
    """The progress of a step: the experiment's job counts its steps itself."""
