"""Transport settings shared by every service (MESHWARD_* environment variables)."""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class BusSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_", extra="ignore")

    nats_url: str = Field(default="nats://127.0.0.1:4222", description="comma-separated NATS server URLs")
    nats_user: str | None = Field(default=None, description="NATS user of this service (the closed bus); unset: no authentication")
    nats_password_file: Path | None = Field(default=None, description="file holding the NATS user's password (never the password itself in the environment)")
    nats_connect_backoff_max_s: float = Field(default=10.0, gt=0, le=300, description="longest wait between start-up connection attempts")
    nats_connect_attempts: int = Field(default=0, ge=0, description="start-up connection attempts before giving up; 0: keep trying")
    request_timeout_s: float = Field(default=10.0, gt=0, le=600, description="default per-request timeout")
    max_concurrency: int = Field(default=64, ge=1, le=10_000, description="in-flight requests per subscription")
    max_request_bytes: int = Field(default=8 * 1_048_576, ge=1_024, le=64 * 1_048_576)
    drain_timeout_s: float = Field(default=10.0, gt=0, le=300, description="grace period for in-flight work on SIGTERM")
    queue_group: str | None = Field(default=None, description="queue group; defaults to the service name")
    instance: str | None = Field(default=None, description="instance name in health replies; defaults to host:pid")

    def servers(self) -> list[str]:
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]

    def redacted_url(self) -> str:
        """The server URLs for log lines: any user:password@ part replaced."""
        return ",".join(re.sub(r"//[^/@]*@", "//***@", u) for u in self.servers())

    def password(self) -> SecretStr | None:
        """The password read from `nats_password_file` (first line); a clear error when it cannot be read."""
        if self.nats_password_file is None:
            return None
        try:
            text = self.nats_password_file.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"cannot read MESHWARD_NATS_PASSWORD_FILE {self.nats_password_file}: {e.strerror}") from None
        secret = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not secret:
            raise ValueError(f"MESHWARD_NATS_PASSWORD_FILE {self.nats_password_file} is empty")
        return SecretStr(secret)

    def inbox_prefix(self) -> str:
        """Reply subjects of this connection: under the user's own inbox, so a service may listen for
        its own replies only (the permission table grants `_INBOX.<user>.>` to each user)."""
        return f"_INBOX.{self.nats_user}" if self.nats_user else "_INBOX"
