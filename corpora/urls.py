from django.urls import path

from accounts.api_base import TokenApiView
from config.resources import resource_paths
from corpora import resources, views

api_urlpatterns = resource_paths(resources, TokenApiView)

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
urlpatterns += [
    path("experiments", views.experiment_list_view, name="experiments"),
    path("experiments/new", views.experiment_new_view, name="experiment-new"),
    path("experiments/<str:name>", views.experiment_detail_view, name="experiment"),
]
