"""The token-gated operations endpoints, declared (config.resources): status, dashboard and statistics
(public), detailed health, logs, and the configuration read and changed. ops.api holds /healthz and
/metrics."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from accounts.api_base import PublicApiView
from config.resources import Action, Read
from ops import serializers as s
from ops.actions import config_update
from ops.configuration import effective_config
from ops.health import health
from ops.queries import dashboard, log_records, run_statistics, system_status

Managed = partial(Read, tag="management", problems=())

# --- status and statistics ---
status = Managed(
    route="status", name="api-status", access=PublicApiView,
    operation_id="status",
    summary="Status: corpora, the active worker fleet per service, the pending conversion backlog, the latest run",
    answer=s.StatusSerializer, fetch=lambda query: system_status(),
)  # fmt: skip
dashboard_read = Managed(
    route="dashboard", name="api-dashboard", access=PublicApiView,
    operation_id="dashboard",
    summary="The operator's dashboard: the status record, open runs with progress, rate and ETA, backlog per "
    "service, stalled and failed jobs, health problems",
    answer=s.DashboardSerializer, fetch=lambda query: dashboard(),
)  # fmt: skip
statistics = Managed(
    route="statistics", name="api-statistics", access=PublicApiView,
    operation_id="statistics",
    summary="Run statistics per (corpus, service): runs, durations, throughput, per-status trend",
    params=s.StatisticsParamsSerializer, answer=s.PairStatisticsSerializer, many=True, problems=(400, 404),
    fetch=lambda query: run_statistics(**query),
)  # fmt: skip

# --- detailed health ---
health_read = Managed(
    route="health", name="api-health",
    operation_id="health",
    summary="Detailed health: each check ok, warning or problem, with a remediation for each that is not ok",
    answer=s.HealthSerializer, fetch=lambda query: health(),
)  # fmt: skip

# --- logs ---
logs = Managed(
    route="logs", name="api-logs",
    operation_id="logs",
    summary="Recent log records of every process (web, jobs, dispatcher, workers), newest first, filtered",
    params=s.LogsParamsSerializer, answer=s.LogsSerializer, problems=(400,), fetch=lambda query: log_records(**query),
)  # fmt: skip

# --- configuration ---
config = Managed(
    route="config", name="api-config",
    operation_id="config",
    summary="The effective configuration, each value with its source (default, environment, api); masked",
    answer=s.ConfigSerializer, fetch=lambda query: effective_config(),
)  # fmt: skip
config_set = Action(
    route="config", name="api-config", method="put", tag="management",
    operation_id="config_set",
    summary="Deep-merge a partial configuration (nested keys merge, lists are replaced, null resets a key)",
    request={"application/json": {"type": "object", "additionalProperties": True}},
    answer=s.ConfigChangeSerializer, problems=(400,),
    act=lambda view, request: replace(
        config_update(request.data, actor=view.actor_name()), configuration=effective_config()
    ),
)  # fmt: skip
