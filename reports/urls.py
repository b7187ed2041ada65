from django.urls import path

from reports import api

api_urlpatterns = [
    path("reports/<str:corpus>/<str:service>/pause", api.PairPauseApi.as_view(), name="api-pair-pause"),
    path("reports/<str:corpus>/<str:service>/resume", api.PairResumeApi.as_view(), name="api-pair-resume"),
    path("conversions/pause", api.FleetPauseApi.as_view(), name="api-conversions-pause"),
    path("conversions/resume", api.FleetResumeApi.as_view(), name="api-conversions-resume"),
]

urlpatterns: list = []
