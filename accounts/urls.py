from django.urls import path

from accounts import api, views

api_urlpatterns = [
    path("audit", api.AuditListApi.as_view(), name="api-audit"),
]

urlpatterns = [
    path("login", views.login_view, name="login"),
    path("logout", views.logout_view, name="logout"),
    path("audit", views.audit_view, name="audit"),
]
