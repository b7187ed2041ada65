from django.urls import path

from services import api, views

api_urlpatterns = [
    path("services", api.ServiceListApi.as_view(), name="api-services"),
    path("services/<str:service>", api.ServiceDetailApi.as_view(), name="api-service"),
    path("services/<str:service>/lease", api.ServiceLeaseApi.as_view(), name="api-service-lease"),
    path("services/<str:service>/profile", api.ServiceProfileApi.as_view(), name="api-service-profile"),
    path("services/<str:service>/workers", api.WorkerListApi.as_view(), name="api-service-workers"),
    path("profiles", api.ProfilePresetsApi.as_view(), name="api-profiles"),
]

urlpatterns = [
    path("services", views.service_list_view, name="services"),
    path("services/<str:service>", views.service_detail_view, name="service"),
    path("services/<str:service>/lease", views.service_lease_view, name="service-lease"),
    path("services/<str:service>/profile", views.service_profile_view, name="service-profile"),
    path("services/<str:service>/delete", views.service_delete_view, name="service-delete"),
    path("services/<str:service>/workers", views.worker_list_view, name="service-workers"),
]
