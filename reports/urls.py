from django.urls import path

from reports import api, views

PAIR = "reports/<str:corpus>/<str:service>"

api_urlpatterns = [
    path("reports/refresh", api.GlobalRefreshApi.as_view(), name="api-reports-refresh"),
    path(f"{PAIR}", api.OverviewApi.as_view(), name="api-report-overview"),
    path(f"{PAIR}/pause", api.PairPauseApi.as_view(), name="api-pair-pause"),
    path(f"{PAIR}/resume", api.PairResumeApi.as_view(), name="api-pair-resume"),
    path(f"{PAIR}/rerun", api.RerunApi.as_view(), name="api-pair-rerun"),
    path(f"{PAIR}/refresh", api.PairRefreshApi.as_view(), name="api-pair-refresh"),
    # Before <severity>, which would take "messages" for a severity (and answer 400).
    path(f"{PAIR}/messages", api.MessagesExportApi.as_view(), name="api-report-messages"),
    path(f"{PAIR}/<str:severity>", api.CategoryReportApi.as_view(), name="api-report-categories"),
    path(f"{PAIR}/<str:severity>/<str:category>", api.WhatOrEntriesApi.as_view(), name="api-report-whats"),
    # The what (and a category holding '/') may contain '/': the view decides where the category ends.
    path(f"{PAIR}/<str:severity>/<str:category>/<path:what>", api.EntryListApi.as_view(), name="api-report-entries"),
    path(
        "corpus/<str:corpus>/<str:service>/document/<str:name>",
        api.DocumentReportApi.as_view(),
        name="api-document-report",
    ),
    path(
        "corpus/<str:corpus>/<str:service>/document/<str:name>/html",
        api.DocumentHtmlApi.as_view(),
        name="api-document-html",
    ),
    path(
        "corpus/<str:corpus>/<str:service>/document/<str:name>/files/<path:member>",
        api.DocumentFileApi.as_view(),
        name="api-document-file",
    ),
    path("services/<str:service>/runtimes", api.RuntimeReportApi.as_view(), name="api-service-runtimes"),
    path("conversions/pause", api.FleetPauseApi.as_view(), name="api-conversions-pause"),
    path("conversions/resume", api.FleetResumeApi.as_view(), name="api-conversions-resume"),
]

DOCUMENT = "corpus/<str:corpus>/<str:service>/document/<str:name>"

urlpatterns = [
    path(f"{PAIR}", views.overview_view, name="corpus-report"),
    path(f"{PAIR}/pause", views.pause_view, name="corpus-report-pause"),
    path(f"{PAIR}/resume", views.resume_view, name="corpus-report-resume"),
    path(f"{PAIR}/rerun", views.rerun_view, name="corpus-report-rerun"),
    path(f"{PAIR}/refresh", views.refresh_view, name="corpus-report-refresh"),
    path(f"{PAIR}/<str:severity>", views.category_view, name="corpus-report-severity"),
    # Category and what may hold '/': the view splits the rest as the API does (report_path_split).
    path(f"{PAIR}/<str:severity>/<path:rest>", views.drill_view, name="corpus-report-drill"),
    path(DOCUMENT, views.document_view, name="corpus-document"),
    path(f"{DOCUMENT}/result.zip", views.document_result_view, name="corpus-document-result"),
    path(f"{DOCUMENT}/html", views.document_html_view, name="corpus-document-html"),
    path(f"{DOCUMENT}/read", views.document_reader_view, name="corpus-document-reader"),
    path(f"{DOCUMENT}/files/<path:member>", views.document_file_view, name="corpus-document-file"),
    path("services/<str:service>/runtimes", views.runtime_view, name="service-runtimes"),
]
