from django.urls import path

from runs import api, views

PAIR = "runs/<str:corpus>/<str:service>"
COMPARE = "compare/<str:corpus>/<str:service_a>/<str:service_b>"

api_urlpatterns = [
    path("runs", api.RunListApi.as_view(), name="api-runs"),
    path(f"{PAIR}", api.PairRunsApi.as_view(), name="api-pair-runs"),
    path(f"{PAIR}/current", api.CurrentRunApi.as_view(), name="api-run-current"),
    path(f"{PAIR}/diff", api.RunDiffApi.as_view(), name="api-run-diff"),
    path(f"{PAIR}/tasks", api.TaskDiffsApi.as_view(), name="api-run-tasks"),
    path("corpora/<str:corpus>/services/<str:service>/snapshot", api.SnapshotApi.as_view(), name="api-snapshot"),
    path(f"{COMPARE}", api.CompareApi.as_view(), name="api-compare"),
    path(f"{COMPARE}/tasks", api.CompareTasksApi.as_view(), name="api-compare-tasks"),
]

urlpatterns: list = [
    # --- retention (pruning of run history; admins only, no API twin) ---
    path("runs/retention", views.retention_view, name="runs-retention"),
    # --- end of retention ---
]
