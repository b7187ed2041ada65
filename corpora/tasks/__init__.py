"""Job kinds and beat tasks of the conversion domain, one module a subject: `corpora` (import, extend,
activation, sandbox, export, experiments) and `reports` (report refreshes, slices, the purge of retired
messages). jobs/apps.py imports this module in every app, which registers both."""

from corpora.tasks import corpora, reports

__all__ = ["corpora", "reports"]
