"""The vocabularies of accounts, each spelled here once: the names of journaled writes (app.operation; every
write action is decorated with its name, accounts.actions.journaled, so each caller journals it under that
name) and what a passkey challenge is for."""

from __future__ import annotations

from django.db import models


class Action(models.TextChoices):
    CORPUS_IMPORT = "corpus.import"
    CORPUS_EXTEND = "corpus.extend"
    CORPUS_DELETE = "corpus.delete"
    SERVICE_ACTIVATION = "service.activation"
    SERVICE_DEACTIVATION = "service.deactivation"
    SERVICE_REGISTER = "service.register"
    SERVICE_DELETE = "service.delete"
    SERVICE_LEASE = "service.lease"
    SERVICE_PROFILE = "service.profile"
    CONVERSIONS_PAUSE = "conversions.pause"
    CONVERSIONS_RESUME = "conversions.resume"
    REPORTS_RERUN = "reports.rerun"
    REPORTS_REFRESH_PAIR = "reports.refresh_pair"
    REPORTS_REFRESH = "reports.refresh"
    RUNS_SNAPSHOT = "runs.snapshot"
    RUNS_PRUNE = "runs.prune"
    MAINTENANCE_REINDEX = "maintenance.reindex"
    MAINTENANCE_ANALYZE = "maintenance.analyze"
    TOKEN_CREATE = "token.create"
    TOKEN_REVOKE = "token.revoke"
    # --- dataset export ---
    CORPUS_EXPORT = "corpus.export"

    # --- sandbox corpora ---
    CORPUS_SANDBOX = "corpus.sandbox"

    # --- profile experiments ---
    EXPERIMENT_START = "experiment.start"

    # --- sessions ---
    SESSION_REVOKE = "session.revoke"

    # --- passkeys ---
    PASSKEY_REGISTER = "passkey.register"
    PASSKEY_SIGN_IN = "passkey.sign_in"
    PASSKEY_RENAME = "passkey.rename"
    PASSKEY_REVOKE = "passkey.revoke"

    # --- configuration ---
    CONFIG_SET = "config.set"


class ChallengePurpose(models.TextChoices):
    """What a passkey challenge is for."""

    REGISTER = "register"
    SIGN_IN = "sign_in"
