"""A software authenticator for the passkey tests that run without a browser: an EC P-256 key of its own,
real "none" attestations and real ES256 assertion signatures, in the JSON a browser sends. It stands in
for the authenticator, not for any part of the server: py_webauthn checks what it signs as it would a
browser's."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.encode_cbor import encode_cbor

# Flags of the authenticator data: user present, user verified, attested credential data included.
UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class Authenticator:
    rp_id: str
    origin: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(32))
    sign_count: int = 0
    user_handle: bytes | None = None
    user_verified: bool = True

    @property
    def id(self) -> str:
        return bytes_to_base64url(self.credential_id)

    def _client_data(self, kind: str, options: dict[str, Any], origin: str | None) -> bytes:
        data = {"type": kind, "challenge": options["challenge"], "origin": origin or self.origin, "crossOrigin": False}
        return json.dumps(data).encode()

    def _auth_data(self, flags: int, rp_id: str | None, attested: bytes = b"") -> bytes:
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        return (
            rp_hash + bytes([flags | (UV if self.user_verified else 0)]) + struct.pack(">I", self.sign_count) + attested
        )

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return encode_cbor({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})

    def create(self, options: dict[str, Any], *, origin: str | None = None, rp_id: str | None = None) -> dict:
        """navigator.credentials.create()'s answer to registration options (as the server sent them)."""
        self.user_handle = base64url_to_bytes(options["user"]["id"])
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + self._cose_key()
        auth_data = self._auth_data(UP | AT, rp_id, attested)
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(self._client_data("webauthn.create", options, origin)),
                "attestationObject": bytes_to_base64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
        }

    def get(self, options: dict[str, Any], *, origin: str | None = None, rp_id: str | None = None) -> dict:
        """navigator.credentials.get()'s answer to authentication options: a signature over the authenticator
        data and the client data's hash, the counter one up."""
        self.sign_count += 1
        client_data = self._client_data("webauthn.get", options, origin)
        auth_data = self._auth_data(UP, rp_id)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "authenticatorData": bytes_to_base64url(auth_data),
                "signature": bytes_to_base64url(signature),
                "userHandle": bytes_to_base64url(self.user_handle) if self.user_handle else None,
            },
            "clientExtensionResults": {},
        }
