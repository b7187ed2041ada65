from django.urls import path

from ops import api, views

api_urlpatterns = [
    path("status", api.StatusApi.as_view(), name="api-status"),
    path("dashboard", api.DashboardApi.as_view(), name="api-dashboard"),
    path("statistics", api.StatisticsApi.as_view(), name="api-statistics"),
    path("health", api.HealthApi.as_view(), name="api-health"),
    path("logs", api.LogsApi.as_view(), name="api-logs"),
    path("config", api.ConfigApi.as_view(), name="api-config"),
]

urlpatterns = [
    path("healthz", api.HealthzApi.as_view(), name="healthz"),
    path("metrics", api.metrics_view, name="metrics"),
    path("", views.home_view, name="home"),
    path("statistics", views.statistics_view, name="statistics"),
    path("health", views.health_view, name="health"),
    path("logs", views.logs_view, name="logs"),
    path("config", views.config_view, name="config"),
]
