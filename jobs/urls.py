from django.urls import path

from accounts.api_base import TokenApiView
from config.resources import resource_paths
from jobs import resources, views

api_urlpatterns = resource_paths(resources, TokenApiView)

urlpatterns = [
    path("jobs", views.job_list_view, name="jobs"),
    path("jobs/<str:uuid>", views.job_detail_view, name="job"),
    path("maintenance", views.maintenance_view, name="maintenance"),
]
