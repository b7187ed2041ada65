from django.urls import path

from corpora import api, views

api_urlpatterns = [
    path("corpora", api.CorpusListApi.as_view(), name="api-corpora"),
    path("corpora/<str:name>", api.CorpusDetailApi.as_view(), name="api-corpus"),
    path("corpora/<str:name>/extend", api.CorpusExtendApi.as_view(), name="api-corpus-extend"),
    path("corpora/<str:corpus>/services/<str:service>", api.ActivationApi.as_view(), name="api-activation"),
    path("corpora/<str:corpus>/services/<str:service>/documents", api.DocumentListApi.as_view(), name="api-documents"),
    # --- sandbox corpora ---
    path("corpora/<str:parent>/sandbox", api.SandboxApi.as_view(), name="api-corpus-sandbox"),
]

# --- dataset export ---
api_urlpatterns += [
    path(
        "corpora/<str:corpus>/services/<str:service>/export-dataset",
        api.DatasetExportApi.as_view(),
        name="api-export-dataset",
    ),
    path("exports", api.ExportListApi.as_view(), name="api-exports"),
    path("exports/<str:out>/<str:name>", api.ExportFileApi.as_view(), name="api-export-file"),
]

urlpatterns = [
    path("corpora", views.corpus_list_view, name="corpora"),
    path("corpora/new", views.corpus_new_view, name="corpus-new"),
    path("corpora/<str:name>", views.corpus_detail_view, name="corpus"),
    path("corpora/<str:name>/extend", views.corpus_extend_view, name="corpus-extend"),
    path("corpora/<str:name>/activate", views.activation_create_view, name="corpus-activate"),
    path("corpora/<str:name>/delete", views.corpus_delete_view, name="corpus-delete"),
    path(
        "corpora/<str:name>/services/<str:service>/deactivate", views.activation_delete_view, name="corpus-deactivate"
    ),
    path("corpora/<str:corpus>/services/<str:service>/documents", views.document_list_view, name="corpus-documents"),
    # --- sandbox corpora ---
    path("corpora/<str:parent>/sandbox", views.corpus_sandbox_view, name="corpus-sandbox"),
]

# --- dataset export ---
urlpatterns += [
    path("corpora/<str:corpus>/services/<str:service>/export", views.export_create_view, name="corpus-export"),
    path("exports", views.export_list_view, name="exports"),
    path("exports/<str:out>/<str:name>", views.export_file_view, name="export-file"),
]

# --- profile experiments ---
api_urlpatterns += [
    path("experiments", api.ExperimentListApi.as_view(), name="api-experiments"),
    path("experiments/<str:name>", api.ExperimentDetailApi.as_view(), name="api-experiment"),
]
urlpatterns += [
    path("experiments", views.experiment_list_view, name="experiments"),
    path("experiments/new", views.experiment_new_view, name="experiment-new"),
    path("experiments/<str:name>", views.experiment_detail_view, name="experiment"),
]
