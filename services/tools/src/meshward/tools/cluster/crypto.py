"""Credentials sealed at rest: Fernet (AES-128-CBC + HMAC-SHA256) under a key derived from MESHWARD_SECRET_KEY.

HKDF rather than the raw secret: any strong string works as the secret, and the derived key is bound to this
use (`info`), so the same secret reused elsewhere yields an unrelated key.
"""
from __future__ import annotations

import base64
import json

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

_INFO = b"meshward/tools/cluster-credentials/v1"


class SealError(Exception):
    """The stored credentials do not open with this key (the secret changed, or the row was altered)."""


class Sealer:
    def __init__(self, secret: SecretStr):
        raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.get_secret_value().encode())
        self._fernet = Fernet(base64.urlsafe_b64encode(raw))

    def seal(self, credentials: dict[str, str]) -> bytes:
        return self._fernet.encrypt(json.dumps(credentials, separators=(",", ":")).encode())

    def open(self, sealed: bytes) -> dict[str, str]:
        try:
            return json.loads(self._fernet.decrypt(sealed))
        except (InvalidToken, ValueError):
            raise SealError("stored cluster credentials cannot be decrypted with the current MESHWARD_SECRET_KEY") from None
