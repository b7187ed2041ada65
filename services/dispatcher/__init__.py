"""The dispatcher: ZeroMQ ventilator and sink (CorTeX wire format), leases, reaper, result ingestion."""
