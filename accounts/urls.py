from django.urls import path

from accounts import api, views

api_urlpatterns = [
    path("audit", api.AuditListApi.as_view(), name="api-audit"),
    # --- sessions ---
    path("sessions", api.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<int:id>", api.SessionDetailApi.as_view(), name="api-session"),
    # --- passkeys ---
    path("passkeys", api.PasskeyListApi.as_view(), name="api-passkeys"),
    path("passkeys/<int:id>", api.PasskeyDetailApi.as_view(), name="api-passkey"),
]

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
