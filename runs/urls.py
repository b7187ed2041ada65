from django.urls import path

from runs import api, views

PAIR = "runs/<str:corpus>/<str:service>"
DOCUMENT = "corpus/<str:corpus>/<str:service>/document/<str:name>"
COMPARE = "compare/<str:corpus>/<str:service_a>/<str:service_b>"

api_urlpatterns = [
    path("runs", api.RunListApi.as_view(), name="api-runs"),
    path(f"{PAIR}", api.PairRunsApi.as_view(), name="api-pair-runs"),
    path(f"{PAIR}/current", api.CurrentRunApi.as_view(), name="api-run-current"),
    path(f"{PAIR}/telemetry", api.TelemetryApi.as_view(), name="api-run-telemetry"),
    path(f"{PAIR}/cost", api.CostApi.as_view(), name="api-run-cost"),
    path(f"{PAIR}/diff", api.RunDiffApi.as_view(), name="api-run-diff"),
    path(f"{PAIR}/tasks", api.TaskDiffsApi.as_view(), name="api-run-tasks"),
    path(f"{PAIR}/classes", api.ClassDiffApi.as_view(), name="api-run-classes"),
    # Category and what may hold '/': the query splits them by the classes that exist (class_split).
    path(f"{PAIR}/classes/<str:severity>/<path:rest>/tasks", api.ClassTasksApi.as_view(), name="api-run-class-tasks"),
    path(f"{PAIR}/packages", api.PackagesApi.as_view(), name="api-run-packages"),
    path(f"{PAIR}/packages/diff", api.PackageDiffApi.as_view(), name="api-run-package-diff"),
    path(f"{PAIR}/packages/export", api.PackageExportApi.as_view(), name="api-run-package-export"),
    path(f"{PAIR}/packages/<str:kind>/<str:package>", api.PackagePapersApi.as_view(), name="api-run-package-papers"),
    path(f"{DOCUMENT}/history", api.DocumentHistoryApi.as_view(), name="api-document-history"),
    path("corpora/<str:corpus>/services/<str:service>/snapshot", api.SnapshotApi.as_view(), name="api-snapshot"),
    path(f"{COMPARE}", api.CompareApi.as_view(), name="api-compare"),
    path(f"{COMPARE}/tasks", api.CompareTasksApi.as_view(), name="api-compare-tasks"),
]

urlpatterns = [
    path("runs", views.run_list_view, name="runs"),
    # Pruning of run history: admins only, no API twin.
    path("runs/retention", views.retention_view, name="runs-retention"),
    path(f"{PAIR}", views.pair_view, name="runs-pair"),
    path(f"{PAIR}/diff", views.diff_view, name="runs-diff"),
    path(f"{PAIR}/tasks", views.tasks_view, name="runs-tasks"),
    path(f"{PAIR}/classes", views.classes_view, name="runs-classes"),
    path(f"{PAIR}/classes/<str:severity>/<path:rest>/tasks", views.class_tasks_view, name="runs-class-tasks"),
    path(f"{PAIR}/packages", views.packages_view, name="runs-packages"),
    path(f"{PAIR}/packages/diff", views.package_diff_view, name="runs-package-diff"),
    path(f"{PAIR}/packages/<str:kind>/<str:package>", views.package_papers_view, name="runs-package-papers"),
    path(f"{DOCUMENT}/history", views.document_history_view, name="runs-document-history"),
    path(f"{PAIR}/snapshot", views.snapshot_view, name="runs-snapshot"),
    path("compare/<str:corpus>", views.compare_pick_view, name="runs-compare-pick"),
    path(f"{COMPARE}", views.compare_view, name="runs-compare"),
    path(f"{COMPARE}/tasks", views.compare_tasks_view, name="runs-compare-tasks"),
]
