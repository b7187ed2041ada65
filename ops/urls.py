from django.urls import path

from accounts.api_base import TokenApiView
from config.resources import resource_paths
from ops import api, resources, views

api_urlpatterns = resource_paths(resources, TokenApiView)

urlpatterns = [
    path("healthz", api.HealthzApi.as_view(), name="healthz"),
    path("metrics", api.metrics_view, name="metrics"),
    path("", views.home_view, name="home"),
    path("statistics", views.statistics_view, name="statistics"),
    path("health", views.health_view, name="health"),
    path("logs", views.logs_view, name="logs"),
    path("config", views.config_view, name="config"),
]
