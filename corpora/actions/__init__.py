"""Writes of the conversion domain, one module a subject: `corpora` (import, extend, sandbox, activation,
deletion), `reports` (reruns, run control, report slices, the purge of retired messages), `history` (snapshots
appended, diffs read, history pruned) and `diffs` (the diff of two snapshots, computed once). Callers
import from the subject's module."""
