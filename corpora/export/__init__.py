"""Dataset export: ZIP archives of a pair's already-converted results, written server-side under
EXPORT_ROOT. Its reads are in `queries`, the request and the start of its job in `actions`, and the
job body in `job`."""
