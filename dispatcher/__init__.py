"""The dispatcher: ZeroMQ ventilator and sink (CorTeX wire format), and result decoding and batching; the
statements it runs on tasks and messages (lease, reap, apply results) are in `corpora.task_changes` and
`corpora.message_store`."""
