"""The WebAuthn ceremonies of passkeys, through py_webauthn: the options a browser hands to
navigator.credentials.create() / .get(), and the checks of what it answers against the relying party of the
settings (PASSKEY_RP_ID, PASSKEY_RP_NAME, PASSKEY_ORIGINS). Reads and writes of the stored passkeys and
challenges are in accounts.queries and accounts.actions; nothing here touches the database.

Passkeys are discoverable (resident) credentials with user verification required: signing in needs no name
typed first, and the authenticator itself checks its owner (PIN, biometrics), so the passkey is a whole
factor like a token."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.authentication.verify_authentication_response import VerifiedAuthentication
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_authentication_credential_json,
    parse_client_data_json,
    parse_registration_credential_json,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    RegistrationCredential,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from webauthn.registration.verify_registration_response import VerifiedRegistration

from config.errors import BadRequest

# What py_webauthn (or the JSON and CBOR readers under it) raises on a malformed answer: it comes from the
# browser, so anything unreadable is the caller's error, never the server's.
_UNREADABLE = (WebAuthnException, ValueError, TypeError, KeyError, AttributeError, IndexError)


def user_handle(actor: str) -> bytes:
    """The WebAuthn user id of an actor: stable (one account per actor on an authenticator), 32 bytes (the
    limit is 64, an actor name may be 100), and not the name itself."""
    return hashlib.sha256(b"ccs passkey user\x00" + actor.encode()).digest()


def _named(name: str, value: str | None) -> str:
    """A relying party setting, which config/settings.py always gives a value (its default)."""
    if not value:
        raise ImproperlyConfigured(f"{name} is empty")
    return value


def relying_party_id() -> str:
    """PASSKEY_RP_ID: the host the passkeys are registered for."""
    return _named("PASSKEY_RP_ID", settings.PASSKEY_RP_ID)


def _timeout_ms() -> int:
    return settings.PASSKEY_CHALLENGE_SECONDS * 1000


def registration_options(*, actor: str, challenge: bytes, registered: list[str]) -> str:
    """The JSON options of navigator.credentials.create() for `actor`; `registered` are the credential ids
    of the actor's active passkeys, which the browser will not register twice on one authenticator."""
    options = generate_registration_options(
        rp_id=relying_party_id(),
        rp_name=_named("PASSKEY_RP_NAME", settings.PASSKEY_RP_NAME),
        user_name=actor,
        user_id=user_handle(actor),
        user_display_name=actor,
        challenge=challenge,
        timeout=_timeout_ms(),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(cid)) for cid in registered],
    )
    return options_to_json(options)


def authentication_options(*, challenge: bytes) -> str:
    """The JSON options of navigator.credentials.get(): no credential named, the authenticator offers the
    passkeys it holds for this relying party."""
    options = generate_authentication_options(
        rp_id=relying_party_id(),
        challenge=challenge,
        timeout=_timeout_ms(),
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options_to_json(options)


def answered_challenge(credential: Any) -> str | None:
    """The challenge (base64url) a browser's answer says it answers, read from its clientDataJSON; None when
    the answer cannot be read. Not a check: the verification below compares it with the issued one."""
    try:
        client_data = base64url_to_bytes(credential["response"]["clientDataJSON"])
        return bytes_to_base64url(parse_client_data_json(client_data).challenge)
    except (*_UNREADABLE, UnicodeError):
        return None


def credential_id_of(credential: Any) -> str | None:
    """The credential id (base64url) an answer names, or None."""
    value = credential.get("id") if isinstance(credential, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 1400 else None


def registration_parsed(credential: Any) -> RegistrationCredential:
    try:
        return parse_registration_credential_json(credential)
    except _UNREADABLE as exc:
        raise BadRequest(f"The passkey's answer cannot be read: {exc}") from exc


def _origin_check(client_data_json: bytes) -> None:
    """Refuse an answer from a page at another origin than the settings' in words that say what to change
    (py_webauthn's own: "Unexpected client data origin")."""
    try:
        origin = parse_client_data_json(client_data_json).origin
    except (*_UNREADABLE, UnicodeError):
        return  # unreadable: the verification says so
    if origin not in settings.PASSKEY_ORIGINS:
        expected = ", ".join(settings.PASSKEY_ORIGINS)
        raise BadRequest(
            f"This page's origin is {origin}, and passkeys work at {expected} (PASSKEY_ORIGINS): open the page"
            " there, or set PASSKEY_ORIGINS and PASSKEY_RP_ID to where the screens are opened (`manage.py up` sets"
            " them from its --host and --port when PASSKEY_ORIGINS is unset)."
        )


def _expected(challenge: bytes) -> dict[str, Any]:
    """What every answer is checked against: the challenge issued, the relying party and origins of the
    settings, and a verified user."""
    return {
        "expected_challenge": challenge,
        "expected_rp_id": relying_party_id(),
        "expected_origin": settings.PASSKEY_ORIGINS,
        "require_user_verification": True,
    }


def registration_verified(credential: RegistrationCredential, challenge: bytes) -> VerifiedRegistration:
    """Check an answer to navigator.credentials.create(): the challenge issued, an origin and relying party
    of the settings, the user present and verified, a supported key. Else BadRequest."""
    _origin_check(credential.response.client_data_json)
    try:
        return verify_registration_response(
            credential=credential,
            **_expected(challenge),
        )
    except _UNREADABLE as exc:
        raise BadRequest(f"The passkey could not be registered: {exc}") from exc


def authentication_parsed(credential: Any) -> AuthenticationCredential:
    try:
        return parse_authentication_credential_json(credential)
    except _UNREADABLE as exc:
        raise BadRequest(f"The passkey's answer cannot be read: {exc}") from exc


def authentication_verified(
    credential: AuthenticationCredential, challenge: bytes, *, actor: str, public_key: bytes, sign_count: int
) -> VerifiedAuthentication:
    """Check an answer to navigator.credentials.get() against a stored passkey: the challenge issued, an
    origin and relying party of the settings, the user present and verified, the signature by the stored
    key, a signature counter that moved on (a cloned authenticator's does not), and the user handle, when
    the authenticator gives one, of the passkey's actor. Else BadRequest."""
    handle = credential.response.user_handle
    if handle is not None and handle != user_handle(actor):
        raise BadRequest("The passkey answered for another user.")
    _origin_check(credential.response.client_data_json)
    try:
        return verify_authentication_response(
            credential=credential,
            credential_public_key=public_key,
            credential_current_sign_count=sign_count,
            **_expected(challenge),
        )
    except _UNREADABLE as exc:
        raise BadRequest(f"The passkey's signature was not accepted: {exc}") from exc
