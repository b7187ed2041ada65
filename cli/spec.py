"""The command table: each ccs command is a row naming its endpoint (method and path), its arguments and
options and where each goes (path, query or body), and, for a write, the plan it prints and whether the
server answers with a job to wait for. cli/main.py turns each row into a Typer command."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

PATH, QUERY, BODY = "path", "query", "body"


@dataclass(frozen=True)
class Param:
    name: str  # the Python name; the CLI spells it with dashes
    help: str
    where: str = QUERY  # path, query or body
    positional: bool = False  # an argument; path parameters always are
    required: bool = True  # a positional that may be left out (trailing ones only)
    type: type = str  # str, int, bool (a flag) or list (a repeatable option)
    key: str | None = None  # the API's name, when it is not `name`
    slashes: bool = False  # a path segment that may hold '/' (a report's category or what)

    @property
    def api_name(self) -> str:
        return self.key or self.name


def arg(name: str, help: str, *, required: bool = True, slashes: bool = False) -> Param:
    return Param(name, help, PATH, positional=True, required=required, slashes=slashes)


def opt(name: str, help: str, type: type = str, where: str = QUERY, key: str | None = None) -> Param:
    return Param(name, help, where, type=type, key=key)


def body_arg(name: str, help: str) -> Param:
    return Param(name, help, BODY, positional=True)


# How a write's answer names its job: the body is the job, the job is under "job" (a debounced job's
# acknowledgement), or a deletion names the job removing the result files in a header.
JOB_BODY, JOB_ACK, JOB_HEADER = "body", "ack", "header"


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    path: str | Callable[[dict[str, Any]], str]  # a template of the path parameters, or a function of all values
    params: tuple[Param, ...] = ()
    method: str = "GET"
    group: str | None = None  # a subcommand of `ccs <group>`
    plan: str | Callable[[dict[str, Any]], str] = ""  # a write's plan in words (a template of the values)
    job: str | None = None  # JOB_BODY, JOB_ACK or JOB_HEADER: the write starts a job --wait can follow
    body: Callable[[dict[str, Any]], Any] | None = None  # the JSON body, when it is not the BODY params
    confirm: str | None = None  # a deletion: the query parameter `confirm` gets this value
    wait_read: bool = False  # a read of one job that can --wait for it
    opens_run: bool = False  # a write that opens a run: --wait follows its job, then the run to its close
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def write(self) -> bool:
        return self.method != "GET"

    @property
    def words(self) -> str:
        """The command as typed after `ccs`: its group, if any, and its name."""
        return f"{self.group} {self.name}" if self.group else self.name


def segment(value: Any, slashes: bool = False) -> str:
    return quote(str(value), safe="/" if slashes else "")


def path_of(command: Command, values: dict[str, Any]) -> str:
    if callable(command.path):
        return command.path(values)
    path = command.path.format(
        **{p.name: segment(values[p.name], p.slashes) for p in command.params if p.where == PATH and p.required}
    )
    tail = [p for p in command.params if p.where == PATH and not p.required]
    for param in tail:
        if values.get(param.name) in (None, ""):
            break
        path += "/" + segment(values[param.name], param.slashes)
    return path


def query_of(command: Command, values: dict[str, Any]) -> dict[str, Any]:
    query: dict[str, Any] = {}
    for param in command.params:
        value = values.get(param.name)
        if param.where != QUERY or value is None or value == [] or value is False:
            continue
        query[param.api_name] = "true" if value is True else value
    if command.confirm:
        query["confirm"] = values[command.confirm]
    return query


def body_of(command: Command, values: dict[str, Any]) -> Any:
    if command.body is not None:
        return command.body(values)
    if not any(p.where == BODY for p in command.params):
        return None
    fields = {p.api_name: values.get(p.name) for p in command.params if p.where == BODY}
    return {key: value for key, value in fields.items() if value is not None and value != []}


def plan_of(command: Command, values: dict[str, Any]) -> str:
    if callable(command.plan):
        return command.plan(values)
    return command.plan.format(**{key: value for key, value in values.items()})


# --- the parameters shared by several commands ---

CORPUS = arg("corpus", "the corpus's name")
SERVICE = arg("service", "the service's name")
OFFSET = opt("offset", "the page's first row (report pages: at most MAX_REPORT_OFFSET)", int)
PAGE_SIZE = opt("page_size", "rows of the page (default 100, at most MAX_REPORT_PAGE_SIZE)", int)
PAGE = (OFFSET, PAGE_SIZE)
PREVIOUS = opt("previous", "the older snapshot's date (from the diff's available_dates; default the second latest)")
CURRENT = opt("current", "the newer snapshot's date (default the latest)")
LIMIT = opt("limit", "at most this many (the server's maximum applies)", int)
EXCLUDE_INFRASTRUCTURE = opt(
    "exclude_infrastructure", "leave out the documents that were an infrastructure failure (Fatal:infrastructure)", bool
)


def _pair_or_all(pair: str, whole: str) -> Callable[[dict[str, Any]], str]:
    """A path for one (corpus, service) pair when both are given, else for everything."""

    def path(values: dict[str, Any]) -> str:
        corpus, service = values.get("corpus"), values.get("service")
        if corpus and service:
            return pair.format(corpus=segment(corpus), service=segment(service))
        if corpus or service:
            raise UsageProblem("give both CORPUS and SERVICE, or neither")
        return whole

    return path


class UsageProblem(Exception):
    """Arguments that do not fit together: a usage error (exit 2)."""


def _runs_path(values: dict[str, Any]) -> str:
    if values.get("corpus_name") or values.get("service_name"):
        if not (values.get("corpus_name") and values.get("service_name")):
            raise UsageProblem("give both CORPUS and SERVICE, or neither")
        return f"/api/runs/{segment(values['corpus_name'])}/{segment(values['service_name'])}"
    return "/api/runs"


def _lease_body(values: dict[str, Any]) -> dict[str, Any]:
    if values.get("clear") == (values.get("seconds") is not None):
        raise UsageProblem("give SECONDS or --clear (exactly one)")
    return {"seconds": None if values.get("clear") else values["seconds"]}


# A profile's on/off options (conversion.profiles.SWITCHES; ccs imports nothing of the project).
PROFILE_SWITCHES = ("includestyles", "pmml", "cmml", "mathtex", "noinvisibletimes", "nodefaultresources")


def _profile_body(values: dict[str, Any]) -> dict[str, Any]:
    """The options given, over --preset: a switch given is on, one not given is the preset's."""
    body: dict[str, Any] = {}
    for key, name in (("preset", "preset"), ("engine", "engine"), ("timeout_seconds", "timeout_seconds"),
                      ("memory_mb", "memory_mb")):  # fmt: skip
        if values.get(name) is not None:
            body[key] = values[name]
    for key, name in (("preloads", "preload"), ("css", "css"), ("paths", "path")):
        if values.get(name):
            body[key] = list(values[name])
    body.update(dict.fromkeys((switch for switch in PROFILE_SWITCHES if values.get(switch)), True))
    return body


def _profile_plan(values: dict[str, Any]) -> str:
    body = _profile_body(values)
    return f"give service {values['service']} the profile {body or {'preset': 'default'}}"


def _scope_words(values: dict[str, Any]) -> str:
    parts = [values.get(key) for key in ("severity", "category", "what")]
    named = [part for part in parts if part]
    return " > ".join(named) if named else "every task"


def config_value(text: str) -> Any:
    """A configuration value as typed: JSON where it parses (numbers, true, null, lists), else the string."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def _config_body(values: dict[str, Any]) -> dict[str, Any]:
    """KEY with dots is a nested key: dispatcher.max_in_flight 64 -> {"dispatcher": {"max_in_flight": 64}}."""
    parts = values["key"].split(".")
    if not all(parts):
        raise UsageProblem(f"not a configuration key: {values['key']!r}")
    value: Any = config_value(values["value"])
    body: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        body = {part: body}
    return body


def _experiment_body(values: dict[str, Any]) -> dict[str, Any]:
    """The experiment's request: the pair, its name and its variants, a JSON list given inline or in a file."""
    import json

    if not values.get("name"):
        raise UsageProblem("give the experiment's name with --name")
    text, path = values.get("variants_json"), values.get("variants_file")
    if (text is None) == (path is None):
        raise UsageProblem("give the variants with --variants-json or --variants-file (exactly one)")
    if path is not None:
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise UsageProblem(f"cannot read {path}: {exc.strerror}") from None
    assert text is not None  # given inline, or read from the file above
    try:
        variants = json.loads(text)
    except ValueError as exc:
        raise UsageProblem(f"the variants are no JSON: {exc}") from None
    return {"corpus": values["corpus"], "service": values["service"], "name": values["name"], "variants": variants}


def _experiment_plan(values: dict[str, Any]) -> str:
    variants = _experiment_body(values)["variants"]
    names = ", ".join(str(v.get("name")) for v in variants if isinstance(v, dict)) if isinstance(variants, list) else ""
    return (
        f"start experiment {values['name']} on {values['corpus']}/{values['service']}: carve its papers with status"
        f" error or fatal into sandbox {values['name']}, register and activate variants {names or '(none)'}"
    )


READS: tuple[Command, ...] = (
    Command("status", "Status: corpora, the active worker fleet, the pending backlog, the latest run.", "/api/status"),
    Command(
        "dashboard",
        "The operator's dashboard: open runs with ETA, backlog, jobs in trouble, health problems.",
        "/api/dashboard",
    ),
    Command(
        "corpora",
        "Corpora with their activated services.",
        "/api/corpora",
    ),
    Command(
        "corpus",
        "One corpus: its activated services and their status counts.",
        "/api/corpora/{name}",
        (arg("name", "the corpus's name"),),
    ),
    Command(
        "services",
        "Registered services (converters).",
        "/api/services",
    ),
    Command("service", "One service, with its converter profile.", "/api/services/{service}", (SERVICE,)),
    Command(
        "profiles",
        "The converter profile presets a service may take by name.",
        "/api/profiles",
    ),
    Command(
        "workers",
        "The workers of a service: dispatched, returned, in flight, seen, kills.",
        "/api/services/{service}/workers",
        (SERVICE,),
    ),
    Command(
        "report",
        "A pair's report: the overview, or a severity's categories, a category's whats, or a what's "
        "documents (one page; --offset/--page-size choose it).",
        "/api/reports/{corpus}/{service}",
        (
            CORPUS,
            SERVICE,
            arg("severity", "no_problem, warning, error, fatal or invalid", required=False),
            arg("category", "a category of that severity", required=False, slashes=True),
            arg("what", "a what of that category", required=False, slashes=True),
            *PAGE,
        ),
    ),
    Command(
        "documents",
        "A pair's documents by name, with their status and whether they have HTML (one page; --status and "
        "--name-prefix narrow it).",
        "/api/corpora/{corpus}/services/{service}/documents",
        (
            CORPUS,
            SERVICE,
            opt("status", "only this status: no_problem, warning, error, fatal, invalid, in_progress, todo, ..."),
            opt("name_prefix", "only the documents whose name starts with this (any case)"),
            *PAGE,
        ),
    ),
    Command(
        "document",
        "One document's status for a service and every message behind it.",
        "/api/corpus/{corpus}/{service}/document/{name}",
        (CORPUS, SERVICE, arg("name", "the document's name")),
    ),
    Command(
        "history",
        "A document's status and message classes in every snapshot of its pair.",
        "/api/corpus/{corpus}/{service}/document/{name}/history",
        (CORPUS, SERVICE, arg("name", "the document's name")),
    ),
    Command(
        "runtimes",
        "A service's runtime report: distribution, histogram, slowest conversions (one page).",
        "/api/services/{service}/runtimes",
        (SERVICE, *PAGE),
    ),
    Command(
        "runs",
        "Runs, newest first: every run (filters), or those of one pair when CORPUS SERVICE are given.",
        _runs_path,
        (
            Param("corpus_name", "a corpus: with SERVICE, that pair's runs", PATH, positional=True, required=False),
            Param("service_name", "a service", PATH, positional=True, required=False),
            opt("corpus", "only runs of this corpus"),
            opt("service", "only runs of this service"),
            opt("owner", "only runs started by this actor"),
            LIMIT,
        ),
    ),
    Command(
        "run",
        "The open run of a pair with its live tallies and ETA, or null.",
        "/api/runs/{corpus}/{service}/current",
        (CORPUS, SERVICE),
    ),
    Command(
        "telemetry",
        "Stage times of the open and last closed run, throughput and ETA.",
        "/api/runs/{corpus}/{service}/telemetry",
        (CORPUS, SERVICE),
    ),
    Command(
        "cost",
        "Cost of the open and last closed run: CPU seconds, papers per core-hour, peak memory, projections.",
        "/api/runs/{corpus}/{service}/cost",
        (CORPUS, SERVICE),
    ),
    Command(
        "diff",
        "The status matrix between two snapshots of a pair (default the two latest).",
        "/api/runs/{corpus}/{service}/diff",
        (CORPUS, SERVICE, PREVIOUS, CURRENT, EXCLUDE_INFRASTRUCTURE),
    ),
    Command(
        "tasks",
        "Documents whose status changed between two snapshots (one page).",
        "/api/runs/{corpus}/{service}/tasks",
        (
            CORPUS,
            SERVICE,
            PREVIOUS,
            CURRENT,
            opt("previous_status", "only from this status"),
            opt("current_status", "only to this status"),
            opt("change", "regressed: only those that got worse"),
            EXCLUDE_INFRASTRUCTURE,
            *PAGE,
        ),
    ),
    Command(
        "classes",
        "Message classes that appeared, vanished, grew or shrank between two snapshots (one page).",
        "/api/runs/{corpus}/{service}/classes",
        (
            CORPUS,
            SERVICE,
            PREVIOUS,
            CURRENT,
            opt("kind", "appeared, vanished, grew or shrank"),
            opt("severity", "only this severity"),
            opt("exclude_infrastructure", "leave out infrastructure failures (Fatal:infrastructure)", bool),
            *PAGE,
        ),
    ),
    Command(
        "class-tasks",
        "Documents that gained or lost a message class between two snapshots (one page).",
        lambda v: (
            f"/api/runs/{segment(v['corpus'])}/{segment(v['service'])}/classes/{segment(v['severity'])}/"
            f"{segment(v['category'], True)}/{segment(v['what'], True)}/tasks"
        ),
        (
            CORPUS,
            SERVICE,
            arg("severity", "the class's severity"),
            arg("category", "its category"),
            arg("what", "its what"),
            opt("change", "gained or lost"),
            PREVIOUS,
            CURRENT,
            *PAGE,
        ),
    ),
    Command(
        "packages",
        "Packages and classes of a pair (or a run), ranked by the papers each alone keeps from being error-free.",
        "/api/runs/{corpus}/{service}/packages",
        (
            CORPUS,
            SERVICE,
            opt("run", "a run's id (default: the tasks now)", int),
            opt("kind", "package or class"),
            *PAGE,
        ),
    ),
    Command(
        "package-papers",
        "The papers behind one package or class of the ranking (one page); of a closed run, those showing trouble.",
        "/api/runs/{corpus}/{service}/packages/{kind}/{package}",
        (
            CORPUS,
            SERVICE,
            arg("kind", "package or class"),
            arg("package", "its name"),
            opt("run", "a run's id (default: the tasks now)", int),
            *PAGE,
        ),
    ),
    Command(
        "package-diff",
        "Packages and classes that gained or lost papers between two snapshots (one page).",
        "/api/runs/{corpus}/{service}/packages/diff",
        (CORPUS, SERVICE, PREVIOUS, CURRENT, *PAGE),
    ),
    Command(
        "compare",
        "Two services on one corpus: A's status x B's status over every document.",
        "/api/compare/{corpus}/{service_a}/{service_b}",
        (CORPUS, arg("service_a", "service A"), arg("service_b", "service B")),
    ),
    Command(
        "compare-tasks",
        "The documents on which two services differ (one page).",
        "/api/compare/{corpus}/{service_a}/{service_b}/tasks",
        (
            CORPUS,
            arg("service_a", "service A"),
            arg("service_b", "service B"),
            opt("status_a", "A's status"),
            opt("status_b", "B's status"),
            opt("change", "regressed: only where B is worse"),
            *PAGE,
        ),
    ),
    Command(
        "jobs",
        "Background jobs, newest first, with health and duration.",
        "/api/jobs",
        (opt("active", "only queued and running jobs", bool), LIMIT),
    ),
    Command(
        "job",
        "One background job; --wait follows it to its end with a progress bar.",
        "/api/jobs/{uuid}",
        (arg("uuid", "the job's uuid"),),
        wait_read=True,
    ),
    Command(
        "audit",
        "The journal of authenticated writes, newest first.",
        "/api/audit",
        (opt("actor", "only this actor's"), opt("action", "only this action"), LIMIT),
    ),
    Command("sessions", "The signed-in screen sessions.", "/api/sessions"),
    Command(
        "passkeys",
        "The token actor's active passkeys (registered in a browser, on the Passkeys screen).",
        "/api/passkeys",
    ),
    Command(
        "logs",
        "Recent log records of every process, newest first (one page; --before is the next_before "
        "cursor of the previous page).",
        "/api/logs",
        (
            opt("level", "minimum level: DEBUG, INFO (the default), WARNING, ERROR or CRITICAL"),
            opt("process", "web, celery-worker, dispatcher, ..."),
            opt("logger", "a logger and its children (celery: celery.beat, celery.app.trace, ...)"),
            opt("request_id", "one request's or job's records"),
            opt("before", "cursor: next_before of the previous page"),
            opt("limit", "records (1 to 500)", int),
        ),
    ),
    Command(
        "health",
        "Detailed health: each check ok, warning or problem, with a remediation.",
        "/api/health",
    ),
    Command(
        "statistics",
        "Run statistics per (corpus, service): runs, durations, throughput.",
        "/api/statistics",
        (opt("corpus", "only this corpus"), opt("service", "only this service")),
    ),
    Command("exports", "Finished dataset exports with their manifests and download links.", "/api/exports"),
    Command(
        "experiments",
        "Profile experiments, newest first, with their variants and their job's state.",
        "/api/experiments",
    ),
    Command(
        "show",
        "One profile experiment: its variants ranked by papers fixed, then broken, with their progress.",
        "/api/experiments/{name}",
        (arg("name", "the experiment's name"),),
        group="experiment",
    ),
)

# `ccs config` (the read) is the `config` group's own command; `ccs config set` is among the writes.
CONFIG_READ = Command(
    "config",
    "The effective configuration, each value with its source; secrets masked.",
    "/api/config",
)

WRITES: tuple[Command, ...] = (
    Command(
        "import",
        "Import a corpus from a directory on the server (inside CORPUS_ROOTS): a background job.",
        "/api/corpora",
        (
            body_arg("name", "the new corpus's name"),
            body_arg("path", "its directory on the server"),
            opt("description", "what the corpus is", where=BODY),
        ),
        method="POST",
        job=JOB_BODY,
        plan="import corpus {name} from {path} on the server",
    ),
    Command(
        "extend",
        "Add the entries that arrived in a corpus's directory since its import: a background job.",
        "/api/corpora/{name}/extend",
        (arg("name", "the corpus's name"),),
        method="POST",
        job=JOB_BODY,
        plan="extend corpus {name} with its directory's new entries",
    ),
    Command(
        "register",
        "Register a service (a converter); creates no tasks.",
        "/api/services",
        (
            body_arg("name", "the service's name"),
            opt("version", "its version", where=BODY),
            opt("command", "its command line", where=BODY),
            opt("description", "what it is", where=BODY),
            opt("lease_seconds", "its lease override in seconds", int, where=BODY),
            opt("inputformat", "tex", where=BODY),
            opt("outputformat", "html", where=BODY),
            opt("profile", "its converter profile: a preset (ccs profiles); `ccs profile` sets options", where=BODY),
        ),
        method="POST",
        plan="register service {name}",
    ),
    Command(
        "profile",
        "Give a service a converter profile: options over --preset (default: the default preset); tasks handed"
        " out from then on get it.",
        "/api/services/{service}/profile",
        (
            SERVICE,
            opt("preset", "the preset the options are given over (ccs profiles)", where="none"),
            opt(
                "engine",
                "latexmlc, another engine's name on the workers' PATH, or a path in PROFILE_ROOTS",
                where="none",
            ),
            opt(
                "preload",
                "a binding to preload, e.g. '[nobibtex,ids]latexml.sty' (repeat for more)",
                list,
                where="none",
            ),
            *(opt(switch, f"--{switch}", bool, where="none") for switch in PROFILE_SWITCHES),
            opt("css", "a stylesheet: an https URL or a path in PROFILE_ROOTS (repeat for more)", list, where="none"),
            opt("path", "a directory of bindings in PROFILE_ROOTS (repeat for more)", list, where="none"),
            opt("timeout_seconds", "seconds a conversion may run (the workers' --timeout caps it)", int, where="none"),
            opt("memory_mb", "memory of a conversion in MB (the workers' --memory-mb caps it)", int, where="none"),
        ),
        method="PUT",
        body=_profile_body,
        plan=_profile_plan,
    ),
    Command(
        "lease",
        "Set a service's lease override in seconds, or clear it with --clear.",
        "/api/services/{service}/lease",
        (
            SERVICE,
            Param("seconds", "the lease in seconds", BODY, positional=True, required=False, type=int),
            opt("clear", "clear the override (the default lease applies)", bool, where="none"),
        ),
        method="PUT",
        body=_lease_body,
        plan=lambda v: (
            f"clear the lease override of service {v['service']}"
            if v.get("clear")
            else f"set the lease of service {v['service']} to {v.get('seconds')} s"
        ),
    ),
    Command(
        "activate",
        "Activate a service on a corpus: one TODO task per document, in a background job.",
        "/api/corpora/{corpus}/services/{service}",
        (CORPUS, SERVICE),
        method="POST",
        job=JOB_BODY,
        plan="activate service {service} on corpus {corpus} (one TODO task per document; opens a run)",
        opens_run=True,
    ),
    Command(
        "deactivate",
        "Deactivate a service on a corpus: delete that pair's tasks, messages and results.",
        "/api/corpora/{corpus}/services/{service}",
        (CORPUS, SERVICE),
        method="DELETE",
        confirm="service",
        job=JOB_HEADER,
        plan="deactivate service {service} on corpus {corpus}: DELETE its tasks, messages and result files",
    ),
    Command(
        "corpus",
        "Delete a corpus with all its documents, tasks, messages and result files.",
        "/api/corpora/{name}",
        (arg("name", "the corpus's name"),),
        method="DELETE",
        group="delete",
        confirm="name",
        job=JOB_HEADER,
        plan="DELETE corpus {name} with all its documents, tasks, messages and result files",
    ),
    Command(
        "service",
        "Delete a service with all its tasks, messages and result files in every corpus.",
        "/api/services/{name}",
        (arg("name", "the service's name"),),
        method="DELETE",
        group="delete",
        confirm="name",
        job=JOB_HEADER,
        plan="DELETE service {name} with its tasks, messages and result files in every corpus",
    ),
    Command(
        "session",
        "Revoke a signed-in screen session: it ends at once.",
        "/api/sessions/{id}",
        (arg("id", "the session's id (ccs sessions)"),),
        method="DELETE",
        group="delete",
        plan="revoke screen session {id}",
    ),
    Command(
        "passkey",
        "Revoke one of the token actor's passkeys: it signs no one in, and its sessions end.",
        "/api/passkeys/{id}",
        (arg("id", "the passkey's id (ccs passkeys)"),),
        method="DELETE",
        group="delete",
        plan="revoke passkey {id}",
    ),
    Command(
        "rename-passkey",
        "Give one of the token actor's passkeys a new name.",
        "/api/passkeys/{id}",
        (arg("id", "the passkey's id (ccs passkeys)"), body_arg("name", "its new name")),
        method="PATCH",
        plan="rename passkey {id} to {name!r}",
    ),
    Command(
        "rerun",
        "Rerun a slice of a pair (all, a severity, a category or a what): its tasks back to TODO in a new run.",
        "/api/reports/{corpus}/{service}/rerun",
        (
            CORPUS,
            SERVICE,
            Param("severity", "a severity", QUERY, positional=True, required=False),
            Param("category", "a category of it", QUERY, positional=True, required=False),
            Param("what", "a what of it", QUERY, positional=True, required=False),
            opt("description", "why, kept with the new run"),
        ),
        method="POST",
        plan=lambda v: (
            f"rerun {_scope_words(v)} of {v['corpus']}/{v['service']}: those tasks "
            "back to TODO, their messages deleted, a new run opened"
        ),
        opens_run=True,
    ),
    Command(
        "pause",
        "Pause a pair's run (its tasks in progress blocked), or every conversion without a pair.",
        _pair_or_all("/api/reports/{corpus}/{service}/pause", "/api/conversions/pause"),
        (arg("corpus", "the corpus (with SERVICE)", required=False), arg("service", "the service", required=False)),
        method="POST",
        plan=lambda v: (
            f"pause {v['corpus']}/{v['service']}: block its tasks in progress"
            if v.get("corpus")
            else "pause EVERY conversion: block all tasks in progress"
        ),
    ),
    Command(
        "resume",
        "Resume a pair's run (blocked tasks back to TODO), or every conversion without a pair.",
        _pair_or_all("/api/reports/{corpus}/{service}/resume", "/api/conversions/resume"),
        (arg("corpus", "the corpus (with SERVICE)", required=False), arg("service", "the service", required=False)),
        method="POST",
        plan=lambda v: (
            f"resume {v['corpus']}/{v['service']}: its blocked tasks back to TODO"
            if v.get("corpus")
            else "resume every conversion: all blocked tasks back to TODO"
        ),
    ),
    Command(
        "snapshot",
        "Append a pair's current task statuses as one snapshot.",
        "/api/corpora/{corpus}/services/{service}/snapshot",
        (CORPUS, SERVICE),
        method="POST",
        plan="snapshot the task statuses of {corpus}/{service}",
    ),
    Command(
        "sandbox",
        "Carve a sandbox corpus from a parent's documents that match a condition: a background job.",
        "/api/corpora/{parent}/sandbox",
        (
            arg("parent", "the parent corpus"),
            body_arg("name", "the sandbox corpus's name"),
            opt("service", "a service active on the parent", where=BODY),
            opt("status", "take tasks of this severity's statuses", where=BODY),
            opt("severity", "the tasks need a message of this severity", where=BODY),
            opt("category", "...of this category (needs --severity)", where=BODY),
            opt("what", "...and this what (needs --category)", where=BODY),
            opt("entry_contains", "a substring of the document's entry", where=BODY),
            opt("limit", "at most this many documents", int, where=BODY),
            opt("per_class_limit", "at most this many per message class", int, where=BODY),
            opt("seed", "the sample's seed", int, where=BODY),
        ),
        method="POST",
        job=JOB_BODY,
        plan="carve sandbox corpus {name} from {parent}",
    ),
    Command(
        "start",
        "Start a profile experiment on a pair: its papers with status error or fatal carved into a sandbox, and"
        " one service per variant (the pair's profile with the variant's changes) activated on it: a job.",
        "/api/experiments",
        (
            CORPUS,
            SERVICE,
            opt("name", "the experiment's name (and its sandbox corpus's)", where="none"),
            opt(
                "variants_json",
                'the variants, a JSON list: [{"name": "long", "changes": {"timeout_seconds": 600}}, ...]',
                where="none",
            ),
            opt("variants_file", "a file holding that JSON list", where="none"),
        ),
        method="POST",
        group="experiment",
        job=JOB_BODY,
        body=_experiment_body,
        plan=_experiment_plan,
    ),
    Command(
        "export",
        "Export a pair's converted results as ZIP archives and a manifest under EXPORT_ROOT: a background job.",
        "/api/corpora/{corpus}/services/{service}/export-dataset",
        (
            CORPUS,
            SERVICE,
            opt("group_by", "severity, month or none", where=BODY),
            opt("severity", "a severity to include (repeat the option for more)", list, where=BODY, key="severities"),
            opt("out", "the directory name inside EXPORT_ROOT", where=BODY),
        ),
        method="POST",
        job=JOB_BODY,
        plan="export the results of {corpus}/{service} under EXPORT_ROOT",
    ),
    Command(
        "set",
        "Change one configuration value live (KEY dotted, VALUE as JSON or text; null resets it).",
        "/api/config",
        (
            Param("key", "a dotted key, e.g. dispatcher.max_in_flight", BODY, positional=True),
            Param("value", "the value: JSON (64, true, null, [..]) or a string", BODY, positional=True),
        ),
        method="PUT",
        group="config",
        body=_config_body,
        plan=lambda v: f"set configuration {v['key']} to {config_value(v['value'])!r}",
    ),
    Command(
        "refresh",
        "Clear a pair's report grains at once, or rebuild the whole report rollup (a job) without a pair.",
        _pair_or_all("/api/reports/{corpus}/{service}/refresh", "/api/reports/refresh"),
        (arg("corpus", "the corpus (with SERVICE)", required=False), arg("service", "the service", required=False)),
        method="POST",
        job=JOB_ACK,
        plan=lambda v: (
            f"clear the report grains of {v['corpus']}/{v['service']}"
            if v.get("corpus")
            else "rebuild the report rollup behind every page (a job)"
        ),
    ),
    Command(
        "reindex",
        "Rebuild the indexes of the high-churn tables online: a background job.",
        "/api/maintenance/reindex",
        method="POST",
        job=JOB_ACK,
        plan="rebuild the high-churn tables' indexes",
    ),
    Command(
        "analyze",
        "Refresh the planner statistics of the high-churn tables: a background job.",
        "/api/maintenance/analyze",
        method="POST",
        job=JOB_ACK,
        plan="refresh the planner statistics",
    ),
)
