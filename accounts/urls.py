from django.urls import path

from accounts import api, views

api_urlpatterns = [
    path("audit", api.AuditListApi.as_view(), name="api-audit"),
    # --- sessions ---
    path("sessions", api.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<int:id>", api.SessionDetailApi.as_view(), name="api-session"),
]

urlpatterns = [
    path("login", views.login_view, name="login"),
    path("logout", views.logout_view, name="logout"),
    path("audit", views.audit_view, name="audit"),
    # --- sessions ---
    path("sessions", views.session_list_view, name="sessions"),
    path("sessions/<int:session_id>/revoke", views.session_revoke_view, name="session-revoke"),
]
