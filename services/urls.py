from django.urls import path

from services import api, views

api_urlpatterns = [
    path("services", api.ServiceListApi.as_view(), name="api-services"),
    path("services/<str:service>", api.ServiceDetailApi.as_view(), name="api-service"),
    path("services/<str:service>/lease", api.ServiceLeaseApi.as_view(), name="api-service-lease"),
    path("services/<str:service>/workers", api.WorkerListApi.as_view(), name="api-service-workers"),
]

urlpatterns = [
    path("services", views.service_list_view, name="services"),
    path("services/<str:service>", views.service_detail_view, name="service"),
    path("services/<str:service>/lease", views.service_lease_view, name="service-lease"),
    path("services/<str:service>/delete", views.service_delete_view, name="service-delete"),
    path("services/<str:service>/workers", views.worker_list_view, name="service-workers"),
]
