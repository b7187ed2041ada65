"""Service tokens (stored hashed) and the operational journal of authenticated writes."""

from __future__ import annotations

from django.db import models

from accounts.choices import ChallengePurpose


class Revocable(models.Model):
    """A credential that holds until it is revoked: `revoked_at` set ends it, and the row stays for the journal."""

    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiToken(Revocable):
    """A bearer token for one actor; only a SHA-256 digest and a lookup prefix are stored."""

    actor = models.CharField(max_length=100, db_index=True)
    prefix = models.CharField(max_length=12, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.actor} ({self.prefix}…)"


class AuditEntry(models.Model):
    """One authenticated write: who, what, on which target, with which parameters, and how it ended."""

    actor = models.CharField(max_length=100)
    action = models.CharField(max_length=100)
    target = models.CharField(max_length=500, blank=True)
    params = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=200)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["actor", "-created_at"], name="audit_actor_created"),
            models.Index(fields=["action", "-created_at"], name="audit_action_created"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target} -> {self.outcome}"


class ScreenSession(models.Model):
    """A signed-in screen session: who, since when, last seen, from where. The Django session key links it
    to its session row and is never shown; the id is what the API, the screen and the command name."""

    session_key = models.CharField(max_length=40, unique=True)
    actor = models.CharField(max_length=100)
    client_address = models.CharField(max_length=100)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-last_seen_at", "-id"]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.actor} from {self.client_address}"


class Passkey(Revocable):
    """A WebAuthn credential (a passkey) of an actor, registered from a signed-in screen session. Only its
    public half is stored: the credential id (base64url, as browsers send it), its COSE public key and the
    authenticator's signature counter. Revoked passkeys stay, so the list and the journal can name them."""

    actor = models.CharField(max_length=100, db_index=True)
    name = models.CharField(max_length=100)
    credential_id = models.CharField(max_length=1400, unique=True)  # up to 1023 bytes, base64url
    public_key = models.BinaryField()
    sign_count = models.PositiveBigIntegerField(default=0)
    transports = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"passkey {self.pk} {self.name!r} of {self.actor}"


class PasskeyChallenge(models.Model):
    """A challenge handed to a browser for one WebAuthn ceremony (registering a passkey or signing in with
    one): bound to that browser's session, used at most once (its row is deleted as it is used) and
    refused after `expires_at`."""

    challenge = models.CharField(max_length=100, unique=True)  # base64url of 32 random bytes
    purpose = models.CharField(max_length=10, choices=ChallengePurpose.choices)
    session_key = models.CharField(max_length=40)
    actor = models.CharField(max_length=100, blank=True)  # who registers; empty for a sign-in
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.purpose} challenge until {self.expires_at:%H:%M:%S}"
