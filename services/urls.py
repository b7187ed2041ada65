from django.urls import path

from accounts.api_base import TokenApiView
from config.resources import resource_paths
from services import resources, views

api_urlpatterns = resource_paths(resources, TokenApiView)

urlpatterns = [
    path("services", views.service_list_view, name="services"),
    path("services/<str:service>", views.service_detail_view, name="service"),
    path("services/<str:service>/lease", views.service_lease_view, name="service-lease"),
    path("services/<str:service>/profile", views.service_profile_view, name="service-profile"),
    path("services/<str:service>/delete", views.service_delete_view, name="service-delete"),
    path("services/<str:service>/workers", views.worker_list_view, name="service-workers"),
]
