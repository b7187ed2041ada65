"""The reads of runs, declared once for their API endpoints (runs.api) and their screens (runs.views):
history, telemetry and cost of a pair, diffs of two snapshots and their task and class lists, package
rankings, a document's history, and the comparison of two services on one corpus."""

from __future__ import annotations

from functools import partial
from typing import Any

from config.api.paging import Page, page_check
from config.resources import Read
from corpora.actions.history import diff_read, task_diffs_read
from corpora.queries.classes import class_diff, class_known, class_split, class_tasks, document_history
from corpora.queries.compare import compare_matrix, compare_scope, compare_tasks
from corpora.queries.corpora import pair_resolve
from corpora.queries.cost import pair_cost
from corpora.queries.diffs import DiffScope, diff_scope
from corpora.queries.history import pair_runs, run_history
from corpora.queries.packages import kind_check, package_diff, package_papers, package_ranking, package_source
from corpora.queries.telemetry import pair_telemetry
from runs import serializers as s

RunsRead = partial(Read, tag="runs")

# The URL patterns of a pair's runs, of a document, and of two services compared.
PAIR = "runs/<str:corpus>/<str:service>"
DOCUMENT = "corpus/<str:corpus>/<str:service>/document/<str:name>"
COMPARE = "compare/<str:corpus>/<str:service_a>/<str:service_b>"


def paged(query: dict[str, Any]) -> Page:
    """The page a query asks for, its offset and page_size taken out of it."""
    return page_check(query.pop("offset", None), query.pop("page_size", None))


def scoped(query: dict[str, Any], corpus: str, service: str) -> DiffScope:
    """The two snapshots a query names (the two latest by default), `previous` and `current` taken out."""
    return diff_scope(pair_resolve(corpus, service), query.pop("previous", None), query.pop("current", None))


def _run_diff(query: dict[str, Any], corpus: str, service: str) -> Any:
    exclude = query.pop("exclude_infrastructure", False)
    return diff_read(diff_scope(pair_resolve(corpus, service), **query), exclude_infrastructure=exclude)[1]


def _task_diffs(query: dict[str, Any], corpus: str, service: str) -> Any:
    page = paged(query)
    return task_diffs_read(scoped(query, corpus, service), page, **query)


def _class_diff(query: dict[str, Any], corpus: str, service: str) -> Any:
    page = paged(query)
    return class_diff(scoped(query, corpus, service), page, **query)


def _class_tasks(query: dict[str, Any], corpus: str, service: str, severity: str, rest: str) -> Any:
    page = paged(query)
    scope = scoped(query, corpus, service)
    return class_tasks(scope, class_known(severity, *class_split(severity, rest)), query["change"], page)


def _compare_tasks(query: dict[str, Any], corpus: str, service_a: str, service_b: str) -> Any:
    page = paged(query)
    return compare_tasks(compare_scope(corpus, service_a, service_b), page, **query)


def _packages(query: dict[str, Any], corpus: str, service: str) -> Any:
    page = paged(query)
    source = package_source(pair_resolve(corpus, service), query.get("run"))
    return package_ranking(source, page, kind_check(query.get("kind")))


def _package_papers(query: dict[str, Any], corpus: str, service: str, kind: str, package: str) -> Any:
    page = paged(query)
    source = package_source(pair_resolve(corpus, service), query.get("run"))
    return package_papers(source, kind_check(kind) or "", package, page)


def _package_diff(query: dict[str, Any], corpus: str, service: str) -> Any:
    page = paged(query)
    return package_diff(scoped(query, corpus, service), page)


run_list = RunsRead(
    route="runs", name="api-runs",
    operation_id="runs_list", summary="Every run, newest first (filters corpus, service, owner; limit)",
    params=s.RunListParamsSerializer, answer=s.RunSerializer, many=True, problems=(400,),
    fetch=lambda query: run_history(**query),
)  # fmt: skip
pair_run_list = RunsRead(
    route=PAIR, name="api-pair-runs",
    operation_id="runs_pair", summary="The runs of a (corpus, service) pair, most recent first",
    params=s.PairRunsParamsSerializer, answer=s.RunSerializer, many=True,
    fetch=lambda query, corpus, service: pair_runs(pair_resolve(corpus, service), **query),
)  # fmt: skip
telemetry = RunsRead(
    route=f"{PAIR}/telemetry", name="api-run-telemetry",
    operation_id="runs_telemetry",
    summary="Stage times of the open and the last closed run (percentiles, histograms), throughput and ETA",
    answer=s.TelemetrySerializer, fetch=lambda query, corpus, service: pair_telemetry(pair_resolve(corpus, service)),
)  # fmt: skip
cost = RunsRead(
    route=f"{PAIR}/cost", name="api-run-cost",
    operation_id="runs_cost",
    summary="Cost of the open and the last closed run: CPU time, papers per core-hour, peak memory, projections",
    answer=s.CostSerializer, fetch=lambda query, corpus, service: pair_cost(pair_resolve(corpus, service)),
)  # fmt: skip
run_diff = RunsRead(
    route=f"{PAIR}/diff", name="api-run-diff",
    operation_id="runs_diff",
    summary="Snapshot dates and the matrix previous status x current status (default: the two latest)",
    params=s.RunDiffParamsSerializer, answer=s.RunDiffSerializer, problems=(400, 404), fetch=_run_diff,
)  # fmt: skip
task_diffs = RunsRead(
    route=f"{PAIR}/tasks", name="api-run-tasks",
    operation_id="runs_tasks", summary="Documents whose status changed between two snapshots, by transition, paginated",
    params=s.TaskDiffParamsSerializer, answer=s.TaskDiffSerializer, many=True, problems=(400, 404), fetch=_task_diffs,
)  # fmt: skip
class_changes = RunsRead(
    route=f"{PAIR}/classes", name="api-run-classes",
    operation_id="runs_classes",
    summary="Message classes that appeared, vanished, grew or shrank between two snapshots, paginated",
    params=s.ClassDiffParamsSerializer, answer=s.ClassChangeSerializer, many=True, problems=(400, 404),
    fetch=_class_diff,
)  # fmt: skip
class_task_list = RunsRead(
    route=f"{PAIR}/classes/<str:severity>/<path:rest>/tasks", name="api-run-class-tasks",
    operation_id="runs_class_tasks",
    summary="Documents that gained or lost a message class between two snapshots, paginated",
    params=s.ClassTasksParamsSerializer, answer=s.ClassTaskSerializer, many=True, problems=(400, 404),
    fetch=_class_tasks,
)  # fmt: skip
history = RunsRead(
    route=f"{DOCUMENT}/history", name="api-document-history",
    operation_id="document_history",
    summary="A document's status and warning, error and fatal classes in every snapshot of its pair",
    answer=s.DocumentHistorySerializer,
    fetch=lambda query, corpus, service, name: document_history(pair_resolve(corpus, service), name),
)  # fmt: skip
compare = RunsRead(
    route=COMPARE, name="api-compare",
    operation_id="compare_services",
    summary="Two services on one corpus: the matrix A's status x B's status over every document",
    answer=s.CompareSerializer, problems=(400, 404),
    fetch=lambda query, corpus, service_a, service_b: compare_matrix(compare_scope(corpus, service_a, service_b)),
)  # fmt: skip
compare_task_list = RunsRead(
    route=f"{COMPARE}/tasks", name="api-compare-tasks",
    operation_id="compare_tasks", summary="The documents on which two services differ, in document order, paginated",
    params=s.CompareParamsSerializer, answer=s.CompareTaskSerializer, many=True, problems=(400, 404),
    fetch=_compare_tasks,
)  # fmt: skip
packages = RunsRead(
    route=f"{PAIR}/packages", name="api-run-packages",
    operation_id="runs_packages",
    summary="Packages and classes of a pair or a run, ranked by the papers each alone keeps from being error-free",
    params=s.PackageParamsSerializer, answer=s.PackageRankingSerializer, problems=(400, 404), fetch=_packages,
)  # fmt: skip
package_paper_list = RunsRead(
    route=f"{PAIR}/packages/<str:kind>/<str:package>", name="api-run-package-papers",
    operation_id="runs_package_papers", summary="The papers behind one package or class of a ranking, paginated",
    description="Live, every paper that used it. With `run`, a closed run keeps only the papers that showed "
    "trouble with it (missing, errors in its definitions, weak), not those that merely loaded it.",
    params=s.PackageParamsSerializer, answer=s.PackagePaperSerializer, many=True, problems=(400, 404),
    fetch=_package_papers,
)  # fmt: skip
package_changes = RunsRead(
    route=f"{PAIR}/packages/diff", name="api-run-package-diff",
    operation_id="runs_package_diff", summary="Packages that gained or lost papers between two snapshots",
    description="`gained` and `lost` name the papers that showed trouble with the package in one snapshot "
    "and not the other; `previous_papers` and `current_papers` count every paper that used it.",
    params=s.PackageDiffParamsSerializer, answer=s.PackageDiffSerializer, problems=(400, 404), fetch=_package_diff,
)  # fmt: skip
