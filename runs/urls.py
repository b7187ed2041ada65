from django.urls import path

from accounts.api_base import PublicApiView
from config.resources import resource_paths
from runs import api, reads, views
from runs.reads import COMPARE, DOCUMENT, PAIR

api_urlpatterns = [
    *resource_paths(reads, PublicApiView),
    path(f"{PAIR}/current", api.CurrentRunApi.as_view(), name="api-run-current"),
    path(f"{PAIR}/packages/export", api.PackageExportApi.as_view(), name="api-run-package-export"),
    path("corpora/<str:corpus>/services/<str:service>/snapshot", api.SnapshotApi.as_view(), name="api-snapshot"),
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
