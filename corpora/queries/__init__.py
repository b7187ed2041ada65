"""Reads of the conversion domain's tables, one module a subject: `corpora` (corpora, pairs and their
documents), `history` (runs, a pair's runs, the open run) with `eta`, `diffs` (snapshot dates, the diff of
two snapshots and its task pages), `classes` (message classes across snapshots), `compare` (two services on
one corpus), `cost`, `packages` (package attribution), `telemetry`, `prune` (what a prune of old history
removes) and `reports` (the message reports, the runtime report, the export of messages). Callers import
from the subject's module."""
