"""Top-level routes: the API under /api (problem+json for anything unknown), screens elsewhere."""

from django.urls import include, path, re_path

from accounts import urls as accounts_urls
from config.api.errors import api_not_found
from corpora import urls as corpora_urls
from jobs import urls as jobs_urls
from ops import urls as ops_urls
from reports import urls as reports_urls
from runs import urls as runs_urls
from services import urls as services_urls
from services.convert import ConvertApi
from wiring.discovery import ApiDocsView, DiscoveryApi, OpenApiJsonView

api_urlpatterns = [
    path("openapi.json", OpenApiJsonView.as_view(), name="api-openapi"),
    path("docs", ApiDocsView.as_view(), name="api-docs"),
    *corpora_urls.api_urlpatterns,
    *services_urls.api_urlpatterns,
    *reports_urls.api_urlpatterns,
    *runs_urls.api_urlpatterns,
    *jobs_urls.api_urlpatterns,
    *accounts_urls.api_urlpatterns,
    *ops_urls.api_urlpatterns,
]

urlpatterns = [
    path("convert", ConvertApi.as_view(), name="convert"),
    path("api", DiscoveryApi.as_view(), name="api-index"),
    path("api/", include(api_urlpatterns)),
    re_path(r"^api(?:/.*)?$", api_not_found),
    path("", include(ops_urls.urlpatterns)),
    path("", include(corpora_urls.urlpatterns)),
    path("", include(services_urls.urlpatterns)),
    path("", include(reports_urls.urlpatterns)),
    path("", include(runs_urls.urlpatterns)),
    path("", include(jobs_urls.urlpatterns)),
    path("", include(accounts_urls.urlpatterns)),
]

handler400 = "config.api.errors.handler400"
handler404 = "config.api.errors.handler404"
handler500 = "config.api.errors.handler500"
