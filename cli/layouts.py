"""How each read is shown to a person (cli/output.py draws it): the few fields and columns a person needs,
names first, long text last, so that a screen reads at 80 columns as at 200. --json prints the API's
answer instead, untouched. The keys are the read commands of cli/spec.py (tests/cli/test_tables.py holds
every read to 80 columns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cli.output import DURATION, LINK, NUM, PROSE, TEXT, TIME, Col, Layout, Rows, dig, duration

# Status counts as the API names them (corpora.serializers.StatusCountsSerializer), in the reports' order.
COMPLETED = ("no_problem", "warning", "error", "fatal", "invalid")
FAILED = ("error", "fatal", "invalid")


def done_of(tallies: dict[str, Any] | None) -> tuple[int, int]:
    """(done, total) of a run's tallies: every task but those TODO, leased or blocked is done."""
    if not tallies:
        return 0, 0
    total = tallies.get("total", 0)
    return total - tallies.get("in_progress", 0) - tallies.get("blocked", 0), total


def _done(tallies: dict[str, Any] | None) -> str:
    done, total = done_of(tallies)
    return f"{done:,}/{total:,}" if total else "-"


def _failed(tallies: dict[str, Any] | None) -> int | None:
    return sum(tallies.get(key, 0) for key in FAILED) if tallies else None


def tallies_words(tallies: dict[str, Any] | None) -> str:
    """The nonzero counts of a run or pair: `2 no_problem, 1 error, 3 todo`."""
    if not tallies:
        return "-"
    keys = (*COMPLETED, "blocked", "todo", "queued")
    shown = [f"{tallies[key]:,} {key}" for key in keys if tallies.get(key)]
    return ", ".join(shown) or "none"


def _pair(record: dict[str, Any]) -> str:
    return f"{record.get('corpus')}/{record.get('service')}"


def _rate(eta: dict[str, Any] | None) -> str | None:
    if not eta or eta.get("rate_per_minute") is None:
        return None
    return f"{eta['rate_per_minute'] / 60:.3g}/s"


def _eta(eta: dict[str, Any] | None) -> str | None:
    if not eta:
        return None
    if eta.get("stalled"):
        return "stalled"
    seconds = eta.get("eta_seconds")
    if seconds is None:
        return None
    return duration(seconds)


def _run_words(run: dict[str, Any] | None) -> str | None:
    if not run:
        return None
    state = "open" if run.get("open") else f"closed, {_failed(run.get('tallies'))} failed"
    return f"#{run['id']} {_pair(run)} ({state}), {_done(run.get('tallies'))} done"


def _short(value: Any, size: int = 12) -> Any:
    return value[:size] if isinstance(value, str) else value


def _job_progress(job: dict[str, Any]) -> str:
    progress = job.get("progress") or {}
    if not progress.get("total"):
        return str(progress.get("current") or "-")
    return f"{progress['current']:,}/{progress['total']:,} ({progress.get('percent') or 0:.0f}%)"


# --- status and the dashboard ---

FLEET = Rows(
    "workers",
    "workers",
    (Col("service", "service"), Col("workers", "workers", NUM), Col("last seen", "last_seen", TIME)),
    empty="no active worker",
)

STATUS = Layout(
    fields=(
        Col("corpora", "corpora", NUM),
        Col("backlog", lambda b: f"{dig(b, 'backlog.todo'):,} todo, {dig(b, 'backlog.queued'):,} queued"),
        Col("latest run", lambda b: _run_words(b.get("latest_run"))),
        Col("its tallies", lambda b: tallies_words(dig(b, "latest_run.tallies"))),
    ),
    tables=(FLEET,),
)

DASHBOARD = Layout(
    fields=(
        Col(
            "health",
            lambda b: " ".join(
                [dig(b, "health.status") or "-"]
                + [f"{p['name']}:{p['status']}" for p in dig(b, "health.problems") or []]
            ),
            PROSE,
        ),
        Col("corpora", "corpora", NUM),
        Col("backlog", lambda b: f"{dig(b, 'backlog.todo'):,} todo, {dig(b, 'backlog.queued'):,} queued"),
        Col("in flight", lambda b: f"{b.get('in_flight', 0):,} ({b.get('in_flight_past_p99', 0):,} past p99)"),
    ),
    tables=(
        Rows(
            "open runs",
            "open_runs",
            (
                Col("run", "id", NUM),
                Col("corpus", "corpus"),
                Col("service", "service"),
                Col("done", lambda r: _done(r.get("tallies")), NUM),
                Col("failed", lambda r: _failed(r.get("tallies")), NUM),
                Col("rate", lambda r: _rate(r.get("eta")), NUM),
                Col("eta", lambda r: _eta(r.get("eta"))),
            ),
        ),
        Rows(
            "backlog per service",
            "backlog_per_service",
            (
                Col("service", "service"),
                Col("todo", "todo", NUM),
                Col("queued", "queued", NUM),
                Col("total", "total", NUM),
            ),
        ),
        Rows(
            "jobs in trouble",
            "jobs",
            (Col("uuid", "uuid"), Col("kind", "kind", TEXT), Col("health", "health"), Col("since", "last_sign", TIME)),
        ),
        Rows(
            "longest in flight",
            "in_flight_longest",
            (
                Col("service", "service"),
                Col("corpus", "corpus"),
                Col("document", "document"),
                Col("running", "elapsed_seconds", DURATION),
                Col("past p99", "past_p99"),
                Col("worker", "worker", TEXT),
            ),
        ),
        FLEET,
    ),
)

# --- corpora and services ---

COUNTS = (
    Col("total", "counts.total", NUM),
    Col("left", "counts.in_progress", NUM),
    Col("ok", "counts.no_problem", NUM),
    Col("warning", "counts.warning", NUM),
    Col("error", "counts.error", NUM),
    Col("fatal", "counts.fatal", NUM),
    Col("invalid", "counts.invalid", NUM),
    Col("blocked", "counts.blocked", NUM),
)

CORPORA = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("name", "name"),
                Col("state", "state"),
                Col("documents", "documents", NUM),
                Col("parent", "parent"),
                Col("imported", "imported_at", TIME),
                Col("services", "services", TEXT),
            ),
            empty="no corpus",
        ),
    )
)

CORPUS = Layout(
    fields=(
        Col("name", "name"),
        Col("state", "state"),
        Col("documents", "documents", NUM),
        Col("parent", "parent"),
        Col("description", "description", PROSE),
        Col("imported", "imported_at", TIME),
        Col("url", "url", LINK),
    ),
    tables=(Rows("services", "services", (Col("service", "name"), *COUNTS, Col("served", "served"))),),
)

SERVICES = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("name", "name"),
                Col("version", "version"),
                Col("corpora", "corpora", NUM),
                Col("profile", "profile_preset"),
                Col("lease", "effective_lease_seconds", DURATION),
                Col("description", "description", TEXT),
            ),
        ),
    )
)

PROFILE_FIELDS = (
    Col("engine", "profile.engine"),
    Col("profile", lambda s: f"{s.get('profile_preset') or 'custom'} ({_short(s.get('profile_hash'))})"),
    Col("preloads", "profile.preloads", TEXT),
    Col("timeout", "profile.timeout_seconds", DURATION),
    Col("memory MB", "profile.memory_mb", NUM),
)

SERVICE = Layout(
    fields=(
        Col("name", "name"),
        Col("version", "version"),
        Col("description", "description", PROSE),
        Col("protected", "protected"),
        Col("corpora", "corpora", NUM),
        Col("lease", lambda s: f"{s['effective_lease_seconds']} s" + ("" if s.get("lease_seconds") else " (default)")),
        *PROFILE_FIELDS,
        Col("url", "url", LINK),
    )
)

PROFILES = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("name", "name"),
                Col("hash", lambda p: _short(p.get("profile_hash"))),
                Col("engine", "profile.engine"),
                Col("description", "description", TEXT),
            ),
        ),
    )
)

WORKERS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("identity", "identity"),
                Col("in flight", "in_flight", NUM),
                Col("dispatched", "dispatched", NUM),
                Col("returned", "returned", NUM),
                Col("engine", "engine_version", TEXT),
                Col("last seen", "last_seen", TIME),
            ),
            empty="no worker",
        ),
    )
)

# --- reports ---

PAIR_FIELD = Col("pair", _pair)


def _statuses(body: dict[str, Any]) -> list[dict[str, Any]]:
    counts, shares = body.get("counts") or {}, body.get("percentages") or {}
    keys = (*COMPLETED, "blocked", "todo", "queued")
    return [{"status": key, "tasks": counts.get(key), "percent": shares.get(key)} for key in keys]


REPORT_OVERVIEW = Layout(
    fields=(
        PAIR_FIELD,
        Col("tasks", "total", NUM),
        Col("run in progress", "run_in_progress"),
        Col("infrastructure", "infrastructure_fatal", NUM),
    ),
    tables=(Rows(None, _statuses, (Col("status", "status"), Col("tasks", "tasks", NUM), Col("%", "percent", NUM))),),
)


def _report_level(name: str) -> Layout:
    return Layout(
        fields=(
            PAIR_FIELD,
            Col("severity", "severity"),
            Col("category", "category"),
            Col("meaning", "meaning", PROSE),
            Col("tasks", "tasks", NUM),
            Col("messages", "messages", NUM),
            Col("rows", lambda b: f"{b.get('count', 0):,}, this page from offset {b.get('offset', 0)}"),
        ),
        tables=(
            Rows(
                None,
                "rows",
                (
                    Col(name, "name"),
                    Col("tasks", "tasks", NUM),
                    Col("%", "task_percent", NUM),
                    Col("messages", "messages", NUM),
                    Col("meaning", "meaning", TEXT),
                ),
                empty=f"no {name}",
            ),
        ),
    )


REPORT_DOCUMENTS = Layout(
    fields=(PAIR_FIELD, Col("class", lambda b: f"{b['severity']} > {b['category']} > {b['what']}", TEXT)),
    tables=(
        Rows(
            None,
            "entries",
            (Col("document", "document"), Col("status", "status"), Col("details", "details", TEXT)),
            empty="no document",
        ),
    ),
)


def report_layout(body: Any) -> Layout:
    """The report's level from its shape: a what's documents, a category's whats, a severity's categories,
    or the overview."""
    if isinstance(body, dict) and "entries" in body:
        return REPORT_DOCUMENTS
    if isinstance(body, dict) and "rows" in body:
        return _report_level("what" if body.get("category") else "category")
    return REPORT_OVERVIEW


DOCUMENTS = Layout(
    fields=(PAIR_FIELD, Col("status", "status"), Col("name prefix", "name_prefix"), Col("from", "offset", NUM)),
    tables=(
        Rows(
            None,
            "documents",
            (
                Col("document", "document"),
                Col("status", "status"),
                Col("runtime", lambda d: d["runtime_ms"] / 1000 if d.get("runtime_ms") is not None else None, DURATION),
                Col("first error", lambda d: f"{p['category']}:{p['what']}" if (p := d.get("problem")) else None, TEXT),
                Col("html", "has_html"),
                Col("entry", "entry", TEXT),
            ),
            links=(("report", "report", "document"), ("html", "html", "document")),
            empty="no document",
        ),
    ),
)

DOCUMENT = Layout(
    fields=(
        Col("document", "document"),
        PAIR_FIELD,
        Col("entry", "entry", TEXT),
        Col("status", "status"),
        Col("summary", "explanation.summary", PROSE),
        Col("missing files", "explanation.missing_files", TEXT),
        Col("attempts", "attempts", NUM),
        Col("runtime", lambda d: d["runtime_ms"] / 1000 if d.get("runtime_ms") is not None else None, DURATION),
        Col("html", "html_url", LINK),
        Col("result", "result_url", LINK),
    ),
    tables=(
        Rows(
            "messages",
            "messages",
            (
                Col("severity", "severity"),
                Col("category", "category"),
                Col("what", "what"),
                Col("details", "details", TEXT),
            ),
        ),
    ),
)


def _history_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for entry in body.get("entries") or []:
        marks = entry.get("classes") or []
        having = [str(number) for number, had in enumerate(marks, 1) if had]
        rows.append({**entry, "had": " ".join(having) if entry.get("classes_known") else "?"})
    return rows


def _numbered(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"n": number, **item} for number, item in enumerate(body.get("classes") or [], 1)]


HISTORY = Layout(
    fields=(Col("document", "document"), PAIR_FIELD, Col("screen", "report_url", LINK)),
    tables=(
        Rows(
            "snapshots",
            _history_rows,
            (
                Col("taken", "taken_at", TIME),
                Col("run", "run.id", NUM),
                Col("live", "live"),
                Col("status", "status"),
                Col("classes (numbers below)", "had", TEXT),
            ),
        ),
        Rows(
            "classes",
            _numbered,
            (
                Col("#", "n", NUM),
                Col("severity", "severity"),
                Col("category", "category"),
                Col("what", "what"),
                Col("meaning", "meaning", TEXT),
            ),
        ),
    ),
)


def _ms(value: Any) -> str | None:
    return duration(value / 1000) if isinstance(value, (int, float)) else None


RUNTIMES = Layout(
    fields=(
        Col("service", "service"),
        Col("conversions", "count", NUM),
        Col("mean", lambda b: _ms(b.get("mean_ms"))),
        Col(
            "percentiles",
            lambda b: "  ".join(f"{p} {_ms(b.get(f'{p}_ms')) or '-'}" for p in ("p50", "p90", "p99", "max")),
        ),
    ),
    tables=(
        Rows(
            "slowest",
            "slowest",
            (
                Col("corpus", "corpus"),
                Col("document", "document"),
                Col("runtime", lambda r: _ms(r.get("runtime_ms")), NUM),
            ),
        ),
        Rows(
            "histogram",
            lambda b: [h for h in b.get("histogram") or [] if h.get("count")],
            (Col("below", lambda h: _ms(h.get("lt_ms")) or "and more", NUM), Col("conversions", "count", NUM)),
        ),
    ),
)

# --- runs ---

RUN_COLUMNS = (
    Col("run", "id", NUM),
    Col("corpus", "corpus"),
    Col("service", "service"),
    Col("started", "started_at", TIME),
    Col("took", lambda r: "open" if r.get("open") else r.get("duration_seconds"), DURATION),
    Col("done", lambda r: _done(r.get("tallies")), NUM),
    Col("failed", lambda r: _failed(r.get("tallies")), NUM),
    Col("owner", "owner", TEXT),
)

RUNS = Layout(tables=(Rows(None, None, RUN_COLUMNS, empty="no run"),))

RUN = Layout(
    fields=(
        Col("run", "id", NUM),
        PAIR_FIELD,
        Col("owner", "owner"),
        Col("description", "description", PROSE),
        Col("started", "started_at", TIME),
        Col("done", lambda r: _done(r.get("tallies")), NUM),
        Col("tallies", lambda r: tallies_words(r.get("tallies")), TEXT),
        Col("rate", lambda r: _rate(r.get("eta"))),
        Col("eta", lambda r: _eta(r.get("eta"))),
        Col("finishes", "eta.finishes_at", TIME),
        Col("stalled", "eta.stalled", PROSE),
        Col("engine", "engine"),
    ),
    null="no open run",
)


def _stages(body: dict[str, Any]) -> list[dict[str, Any]]:
    run = body.get("open_run") or body.get("last_closed_run") or {}
    return run.get("stages") or []


def _stage_ms(key: str) -> Col:
    return Col(key, lambda s: _ms(dig(s, f"{key}.ms")), NUM)


TELEMETRY = Layout(
    fields=(
        PAIR_FIELD,
        Col("stages of run", lambda b: (b.get("open_run") or b.get("last_closed_run") or {}).get("id"), NUM),
        Col("rate", lambda b: _rate(b.get("eta"))),
        Col("eta", lambda b: _eta(b.get("eta"))),
        Col("left", "eta.remaining", NUM),
    ),
    tables=(
        Rows(
            "stages",
            _stages,
            (Col("stage", "stage"), Col("count", "count", NUM), _stage_ms("p50"), _stage_ms("p90"), _stage_ms("p99")),
        ),
        Rows(
            "throughput",
            "throughput",
            (Col("minute", "minute", TIME), Col("completed", "completed", NUM)),
            empty="no result applied in the open run",
        ),
    ),
)

_COST_METRICS = (
    ("run", "id"),
    ("results", "results"),
    ("measured", "measured"),
    ("CPU seconds", "cpu_seconds"),
    ("CPU s per paper", "cpu_seconds_per_paper"),
    ("papers per core-hour", "papers_per_core_hour"),
    ("peak memory p50 MiB", "peak_memory.p50.mib"),
    ("peak memory max MiB", "peak_memory.max.mib"),
    ("corpus core-hours", "projections.corpus.core_hours"),
    ("arXiv core-hours", "projections.arxiv.core_hours"),
)


def _cost_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    runs = (body.get("open_run"), body.get("last_closed_run"))
    return [
        {
            "metric": label,
            "open": dig(runs[0], key) if runs[0] else None,
            "closed": dig(runs[1], key) if runs[1] else None,
        }
        for label, key in _COST_METRICS
    ]


COST = Layout(
    fields=(PAIR_FIELD,),
    tables=(
        Rows(
            None, _cost_rows, (Col("", "metric"), Col("open run", "open", NUM), Col("last closed run", "closed", NUM))
        ),
    ),
)

SNAPSHOTS = (Col("previous", "previous", TIME), Col("current", "current", TIME))

DIFF = Layout(
    fields=(
        PAIR_FIELD,
        *SNAPSHOTS,
        Col("total", "total", NUM),
        Col("changed", "changed", NUM),
        Col("regressions", "regressions", NUM),
        Col("infrastructure", "infrastructure", NUM),
        Col("left out", lambda b: "infrastructure failures" if b.get("exclude_infrastructure") else None),
    ),
    tables=(
        Rows(
            None,
            "matrix",
            (
                Col("previous", "previous"),
                Col("current", "current"),
                Col("documents", "count", NUM),
                Col("regression", "regression"),
            ),
            empty="no two snapshots to compare",
        ),
    ),
)

TASKS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("document", "document"),
                Col("previous", "previous_status"),
                Col("current", "current_status"),
                Col("regression", "regression"),
            ),
            links=(("report", "report", "document"),),
            empty="no document changed",
        ),
    )
)

CLASSES = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("severity", "severity"),
                Col("category", "category"),
                Col("what", "what"),
                Col("kind", "kind"),
                Col("before", "previous_tasks", NUM),
                Col("after", "current_tasks", NUM),
                Col("change", "change", NUM),
                Col("meaning", "meaning", TEXT),
            ),
            empty="no class changed",
        ),
    )
)

CLASS_TASKS = Layout(
    tables=(
        Rows(
            None,
            None,
            (Col("document", "document"), Col("change", "change")),
            links=(
                ("screen", "report_url", "document"),
                ("report", "document_api_url", "document"),
                ("history", "history_url", "document"),
            ),
            empty="no document",
        ),
    )
)

PACKAGES = Layout(
    fields=(PAIR_FIELD, Col("run", "run", NUM), Col("taken", "taken_at", TIME), Col("packages", "count", NUM)),
    tables=(
        Rows(
            None,
            "rows",
            (
                Col("package", "package"),
                Col("kind", "kind"),
                Col("clears", "clears", NUM),
                Col("weak", "clears_weak", NUM),
                Col("only missing", "only_missing", NUM),
                Col("papers", "papers", NUM),
                Col("evidence", "evidence", TEXT),
            ),
            empty="no package",
        ),
    ),
)

PACKAGE_PAPERS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("document", "document"),
                Col("status", "status"),
                Col("clears", "clears"),
                Col("weak", "clears_weak"),
                Col("only missing", "only_missing"),
                Col("evidence", "evidence", TEXT),
            ),
            links=(("screen", "url", "document"), ("report", "api_url", "document")),
            empty="no paper",
        ),
    )
)

PACKAGE_DIFF = Layout(
    fields=(PAIR_FIELD, *SNAPSHOTS),
    tables=(
        Rows(
            None,
            "changes",
            (
                Col("package", "package"),
                Col("kind", "kind"),
                Col("before", "previous_papers", NUM),
                Col("after", "current_papers", NUM),
                Col("gained", "gained_count", NUM),
                Col("lost", "lost_count", NUM),
                Col("gained documents", "gained", TEXT),
            ),
            empty="no package changed",
        ),
    ),
)


def _side(key: str) -> Col:
    def words(body: dict[str, Any]) -> str:
        side = body.get(key) or {}
        run = side.get("run") or {}
        preset = side.get("profile_preset") or "custom"
        profile = f"{side.get('engine')} {preset} ({_short(side.get('profile_hash'))})"
        return f"{side.get('service')}: {profile}, run #{run.get('id', '-')}"

    return Col(key.replace("profile_", "service "), words, TEXT)


COMPARE = Layout(
    fields=(
        Col("corpus", "corpus"),
        _side("profile_a"),
        _side("profile_b"),
        Col("documents", "total", NUM),
        Col("differ", "differ", NUM),
        Col("regressions", "regressions", NUM),
    ),
    tables=(
        Rows(
            None,
            "matrix",
            (
                Col("A", "status_a"),
                Col("B", "status_b"),
                Col("documents", "count", NUM),
                Col("regression", "regression"),
            ),
        ),
    ),
)

COMPARE_TASKS = Layout(
    tables=(
        Rows(
            None,
            None,
            (Col("document", "document"), Col("A", "status_a"), Col("B", "status_b"), Col("regression", "regression")),
            links=(("A's report", "report_a", "document"), ("B's report", "report_b", "document")),
            empty="no document differs",
        ),
    )
)

# --- jobs, the journal, sessions ---

JOBS = Layout(
    tables=(
        Rows(
            None,
            None,
            (Col("uuid", "uuid"), Col("kind", "kind", TEXT), Col("state", "state"), Col("created", "created_at", TIME)),
            empty="no job",
        ),
    )
)

JOB = Layout(
    fields=(
        Col("uuid", "uuid"),
        Col("kind", "kind"),
        Col("state", "state"),
        Col("health", "health"),
        Col("actor", "actor"),
        Col("progress", _job_progress),
        Col("message", "message", PROSE),
        Col("params", "params", TEXT),
        Col("result", "result", TEXT),
        Col("created", "created_at", TIME),
        Col("finished", "finished_at", TIME),
        Col("took", "duration_seconds", DURATION),
        Col("url", "url", LINK),
    ),
    tables=(Rows("log", lambda j: [{"line": line} for line in j.get("log") or []], (Col("line", "line", TEXT),)),),
)

AUDIT = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("id", "id", NUM),
                Col("time", "created_at", TIME),
                Col("actor", "actor"),
                Col("action", "action"),
                Col("target", "target", TEXT),
                Col("outcome", "outcome"),
            ),
            empty="no entry",
        ),
    )
)

SESSIONS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("id", "id", NUM),
                Col("actor", "actor"),
                Col("from", "client_address", TEXT),
                Col("last seen", "last_seen_at", TIME),
                Col("expires", "expires_at", TIME),
            ),
            empty="no session",
        ),
    )
)

PASSKEYS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("id", "id", NUM),
                Col("name", "name", TEXT),
                Col("actor", "actor"),
                Col("created", "created_at", TIME),
                Col("last used", "last_used_at", TIME),
            ),
            empty="no passkey",
        ),
    )
)

LOGS = Layout(
    fields=(Col("older page", lambda b: f"--before {b['next_before']}" if b.get("next_before") else "none"),),
    tables=(
        Rows(
            None,
            "records",
            (
                Col("time", "time", TIME),
                Col("level", "level"),
                Col("process", "process"),
                Col("message", "message", TEXT),
            ),
            empty="no record",
        ),
    ),
)


def _remedies(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [check for check in body.get("checks") or [] if check.get("remediation")]


HEALTH = Layout(
    fields=(Col("status", "status"), Col("checked", "checked_at", TIME)),
    tables=(
        Rows(None, "checks", (Col("check", "name"), Col("status", "status"), Col("summary", "summary", TEXT))),
        Rows(
            "what to do", _remedies, (Col("check", "name"), Col("remediation", "remediation", PROSE)), empty="nothing"
        ),
    ),
)

CONFIG = Layout(
    tables=(
        Rows(
            None,
            "entries",
            (
                Col("key", "key"),
                Col("value", "value", TEXT),
                Col("source", "source"),
                Col("restart", lambda e: "pending" if e.get("restart_pending") else None),
            ),
        ),
    )
)

STATISTICS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("corpus", "corpus"),
                Col("service", "service"),
                Col("runs", "runs", NUM),
                Col("mean", "mean_duration_seconds", DURATION),
                Col("last", "last_duration_seconds", DURATION),
                Col("tasks/hour", "tasks_per_hour", NUM),
            ),
            empty="no closed run",
        ),
    )
)


def _size(value: Any) -> str | None:
    if not isinstance(value, (int, float)):
        return None
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _archives(body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    files = []
    for export in body or []:
        files.append({"out": export["out"], "name": "manifest.json", "url": export.get("manifest_url")})
        files += [{"out": export["out"], **archive} for archive in export.get("archives") or []]
    return files


EXPORTS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("out", "out"),
                Col("corpus", "corpus"),
                Col("service", "service"),
                Col("created", "created_at", TIME),
                Col("documents", "documents", NUM),
                Col("size", lambda e: _size(e.get("bytes")), NUM),
            ),
            empty="no export",
        ),
        Rows(
            "files",
            _archives,
            (
                Col("out", "out"),
                Col("file", "name"),
                Col("documents", "documents", NUM),
                Col("size", lambda a: _size(a.get("bytes")), NUM),
                Col("url", "url", LINK),
            ),
        ),
    ),
)

# --- profile experiments ---

EXPERIMENTS = Layout(
    tables=(
        Rows(
            None,
            None,
            (
                Col("name", "name"),
                Col("pair", _pair),
                Col("variants", lambda e: ", ".join(e.get("variants") or []), TEXT),
                Col("state", "state"),
                Col("created", "created_at", TIME),
            ),
            links=(("experiment", "url", "name"),),
            empty="no experiment",
        ),
    )
)


def _papers(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda v: " ".join(paper["name"] for paper in v.get(key) or []) or "-"


EXPERIMENT = Layout(
    fields=(
        Col("name", "experiment.name"),
        Col("pair", lambda d: _pair(d.get("experiment") or {})),
        Col("sandbox", "experiment.sandbox"),
        Col("papers", "papers", NUM),
        Col("state", "experiment.state"),
        Col("progress", lambda d: f"{d.get('progress_current')}/{d.get('progress_total')} {d.get('message') or ''}"),
    ),
    tables=(
        Rows(
            "variants",
            "variants",
            (
                Col("rank", "rank", NUM),
                Col("variant", "name"),
                Col("done", lambda v: f"{v.get('done')}/{v.get('total')}", NUM),
                Col("fixed", "fixed", NUM),
                Col("broken", "broken", NUM),
                Col("changes", "changes", TEXT),
            ),
            empty="no variant",
        ),
        Rows(
            "papers",
            "variants",
            (
                Col("variant", "name"),
                Col("fixed", _papers("fixed_papers"), TEXT),
                Col("broken", _papers("broken_papers"), TEXT),
            ),
        ),
    ),
)

LAYOUTS: dict[str, Any] = {
    "status": STATUS,
    "dashboard": DASHBOARD,
    "corpora": CORPORA,
    "corpus": CORPUS,
    "services": SERVICES,
    "service": SERVICE,
    "profiles": PROFILES,
    "workers": WORKERS,
    "report": report_layout,
    "documents": DOCUMENTS,
    "document": DOCUMENT,
    "history": HISTORY,
    "runtimes": RUNTIMES,
    "runs": RUNS,
    "run": RUN,
    "telemetry": TELEMETRY,
    "cost": COST,
    "diff": DIFF,
    "tasks": TASKS,
    "classes": CLASSES,
    "class-tasks": CLASS_TASKS,
    "packages": PACKAGES,
    "package-papers": PACKAGE_PAPERS,
    "package-diff": PACKAGE_DIFF,
    "compare": COMPARE,
    "compare-tasks": COMPARE_TASKS,
    "jobs": JOBS,
    "job": JOB,
    "audit": AUDIT,
    "sessions": SESSIONS,
    "passkeys": PASSKEYS,
    "logs": LOGS,
    "health": HEALTH,
    "config": CONFIG,
    "statistics": STATISTICS,
    "exports": EXPORTS,
    "experiments": EXPERIMENTS,
    "experiment show": EXPERIMENT,
}
