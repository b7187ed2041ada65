"""Reads of runs and snapshots, one module a subject: `history` (runs, a pair's runs, the open run),
`diffs` (snapshot dates, the diff of two snapshots and its task pages), `compare` (two services on one
corpus) and `prune` (what a prune of old history removes). Callers import from the subject's module."""
