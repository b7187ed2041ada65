from django.urls import path

from jobs import api, views

api_urlpatterns = [
    path("jobs", api.JobListApi.as_view(), name="api-jobs"),
    path("jobs/<str:uuid>", api.JobDetailApi.as_view(), name="api-job"),
    path("maintenance/reindex", api.MaintenanceReindexApi.as_view(), name="api-maintenance-reindex"),
    path("maintenance/analyze", api.MaintenanceAnalyzeApi.as_view(), name="api-maintenance-analyze"),
]

urlpatterns = [
    path("jobs", views.job_list_view, name="jobs"),
    path("jobs/<str:uuid>", views.job_detail_view, name="job"),
    path("maintenance", views.maintenance_view, name="maintenance"),
]
