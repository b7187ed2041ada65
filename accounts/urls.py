from django.urls import path

from accounts import resources, views
from accounts.api_base import TokenApiView
from config.resources import resource_paths

api_urlpatterns = resource_paths(resources, TokenApiView)

urlpatterns = [
    path("login", views.login_view, name="login"),
    path("logout", views.logout_view, name="logout"),
    path("audit", views.audit_view, name="audit"),
    # --- sessions ---
    path("sessions", views.session_list_view, name="sessions"),
    path("sessions/<int:session_id>/revoke", views.session_revoke_view, name="session-revoke"),
    # --- passkeys ---
    path("login/passkey/options", views.passkey_sign_in_options_view, name="passkey-sign-in-options"),
    path("login/passkey", views.passkey_sign_in_view, name="passkey-sign-in"),
    path("passkeys", views.passkey_list_view, name="passkeys"),
    path("passkeys/register/options", views.passkey_register_options_view, name="passkey-register-options"),
    path("passkeys/register", views.passkey_register_view, name="passkey-register"),
    path("passkeys/<int:passkey_id>/rename", views.passkey_rename_view, name="passkey-rename"),
    path("passkeys/<int:passkey_id>/revoke", views.passkey_revoke_view, name="passkey-revoke"),
]
