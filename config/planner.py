"""Planner settings for bulk statements over millions of rows (slice builds, snapshots, comparisons): the
hash tables stay in memory, and JIT compilation, which costs more than it saves on these plans, is off."""

BULK_SETTINGS = ("SET LOCAL work_mem = '256MB'", "SET LOCAL jit = off")
