"""The closed bus: one NATS user per service and what each may publish and subscribe.

This table is the single source of the bus's permissions: `meshward up` renders it into the
embedded server's configuration (`server_authorization`), and compose/k8s render the same
(`meshward.bus.permissions` is importable without a running server). Whatever is not listed is
denied by the server: a client with no or wrong credentials cannot connect at all, and a
service's user cannot publish outside its row (for example a fake violation event, which would
teach memory's known-threats layer).

Replies: a responder may answer the requests it received (`allow_responses`); a requester
listens only under its own inbox prefix `_INBOX.<user>` (BusSettings.inbox_prefix), so no
service can read another's replies. JetStream: publishers may create the events stream (an
idempotent create with the one configuration in code) and publish their own event subjects;
memory alone manages the stream, its durable consumer and the acks.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from meshward.contracts.subjects import (
    EVENT_APPROVAL,
    EVENT_CLUSTER_AUDIT,
    EVENT_CLUSTER_HEALTH,
    EVENT_INTERACTION,
    EVENT_TOOL_CALLED,
    EVENT_VIOLATION,
    EVENTS_STREAM,
    MEMORY_SIMILAR_THREATS,
    PREFIX,
    RUNS_CONSUMER,
    RUNS_KV_RUNS,
    RUNS_KV_THREADS,
    RUNS_STREAM,
    TOOL_RESULTS_KV,
    health,
)

MEMORY_DURABLE = "memory"  # the memory service's durable consumer (MESHWARD_MEMORY_CONSUMER_NAME's default)

_JS = "$JS.API"
_STREAM_CREATE = f"{_JS}.STREAM.CREATE.{EVENTS_STREAM}"
_STREAM_INFO = f"{_JS}.STREAM.INFO.{EVENTS_STREAM}"
_STREAM_UPDATE = f"{_JS}.STREAM.UPDATE.{EVENTS_STREAM}"


def _own(service: str) -> str:
    return f"{PREFIX}.{service}.>"


def inbox(user: str) -> str:
    return f"_INBOX.{user}.>"


@dataclass(frozen=True)
class Permissions:
    """What one service's user may do. `subscribe` gets the user's own inbox added; responses are allowed."""

    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    description: str = ""


def _event_publisher(*event_subjects: str) -> tuple[str, ...]:
    return (*event_subjects, _STREAM_CREATE, _STREAM_INFO)


def _consumer(durable: str, stream: str = EVENTS_STREAM) -> tuple[str, ...]:
    return (
        f"{_JS}.STREAM.CREATE.{stream}", f"{_JS}.STREAM.INFO.{stream}", f"{_JS}.STREAM.UPDATE.{stream}",
        f"{_JS}.CONSUMER.INFO.{stream}.{durable}",
        f"{_JS}.CONSUMER.CREATE.{stream}.{durable}",
        f"{_JS}.CONSUMER.CREATE.{stream}.{durable}.>",
        f"{_JS}.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"{_JS}.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    )


def _kv(bucket: str) -> tuple[str, ...]:
    """A JetStream KV bucket: create/open it, read and write keys, list keys (an ephemeral ordered consumer)."""
    stream = f"KV_{bucket}"
    return (
        f"{_JS}.STREAM.CREATE.{stream}", f"{_JS}.STREAM.INFO.{stream}", f"{_JS}.STREAM.MSG.GET.{stream}",
        f"{_JS}.DIRECT.GET.{stream}.>", f"{_JS}.CONSUMER.CREATE.{stream}", f"{_JS}.CONSUMER.CREATE.{stream}.>",
        f"{_JS}.CONSUMER.DELETE.{stream}.>", f"{_JS}.CONSUMER.INFO.{stream}.>", f"$KV.{bucket}.>",
    )


PERMISSIONS: dict[str, Permissions] = {
    "supervisor": Permissions(
        publish=(
            _own("security"), _own("intent"), _own("tools"), _own("memory"), _own("llm"),
            health("*"),
            *_event_publisher(EVENT_INTERACTION, EVENT_APPROVAL),
            # Agent Protocol runs: the work queue, run events and cancels between replicas, thread/run records
            f"{PREFIX}.supervisor.runs.>", *_consumer(RUNS_CONSUMER, RUNS_STREAM), *_kv(RUNS_KV_THREADS), *_kv(RUNS_KV_RUNS),
        ),
        subscribe=(_own("supervisor"),),
        description="the only caller of the agents (security, intent, tools, memory, llm) and of approved tool calls; interaction and approval events; "
                    "its own replicas' run queue, run events and records",
    ),
    "security": Permissions(
        publish=(MEMORY_SIMILAR_THREATS, *_event_publisher(EVENT_VIOLATION)),
        subscribe=(_own("security"),),
        description="the only publisher of violation events; asks memory for known threats",
    ),
    "intent": Permissions(subscribe=(_own("intent"),), description="answers its own subjects only"),
    "tools": Permissions(
        publish=(*_event_publisher(EVENT_TOOL_CALLED, EVENT_CLUSTER_AUDIT, EVENT_CLUSTER_HEALTH), *_kv(TOOL_RESULTS_KV)),
        subscribe=(_own("tools"),),
        description="answers its own subjects; tool-called, cluster audit and cluster health events; its results-by-key bucket",
    ),
    "memory": Permissions(
        publish=_consumer(MEMORY_DURABLE),
        subscribe=(_own("memory"),),
        description="consumes the events stream through its durable consumer; answers its own subjects",
    ),
    "llm": Permissions(
        # streamed tokens (ChatChunk) go to the inbox the supervisor named in the request, beside the reply
        publish=(inbox("supervisor"),),
        subscribe=(_own("llm"),),
        description="answers its own subjects; streams tokens to the supervisor's inboxes only",
    ),
}


def allowed(user: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(publish, subscribe) allow-lists of `user`, its inbox included."""
    p = PERMISSIONS[user]
    return p.publish, (*p.subscribe, inbox(user))


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_quote(v) for v in values) + "]"


def server_authorization(password_hashes: Mapping[str, str]) -> str:
    """The nats-server `authorization` block for these users (bcrypt hashes, never the passwords).

    Every user of the table needs a hash: a user left out could not connect, and a row that no
    longer exists must not keep access.
    """
    missing = set(PERMISSIONS) - set(password_hashes)
    unknown = set(password_hashes) - set(PERMISSIONS)
    if missing or unknown:
        raise ValueError(f"credentials must cover exactly the services of the table (missing {sorted(missing)}, unknown {sorted(unknown)})")
    users = []
    for user in PERMISSIONS:
        publish, subscribe = allowed(user)
        users.append(
            f"    {{user: {_quote(user)}, password: {_quote(password_hashes[user])}, permissions: {{\n"
            f"      publish: {{allow: {_list(publish) if publish else '[]'}}}\n"
            f"      subscribe: {{allow: {_list(subscribe)}}}\n"
            f"      allow_responses: true\n"
            f"    }}}}"
        )
    return "authorization {\n  users: [\n" + "\n".join(users) + "\n  ]\n}\n"


def hash_password(password: str, rounds: int = 10) -> str:
    import bcrypt  # noqa: PLC0415 - only where a configuration is rendered

    # nats-server recognises bcrypt hashes by the "$2a$" prefix
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=rounds, prefix=b"2a")).decode()


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT


@dataclass(frozen=True)
class Credentials:
    """Where each service's password lies (one 0600 file each) and the server's authorization block."""

    directory: Path
    authorization: str

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def env(self, user: str) -> dict[str, str]:
        """What a service process needs: its user name and the path of its own password file."""
        return {"MESHWARD_NATS_USER": user, "MESHWARD_NATS_PASSWORD_FILE": str(self.password_file(user))}


def generate_credentials(directory: Path) -> Credentials:
    """A fresh random password per service, each in its own 0600 file under a 0700 `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    hashes = {}
    for user in PERMISSIONS:
        password = secrets.token_urlsafe(32)
        write_private(directory / f"{user}.password", password + "\n")
        hashes[user] = hash_password(password)
    return Credentials(directory, server_authorization(hashes))
