"""The `meshward` command.

    meshward up                      start everything locally (embedded NATS unless MESHWARD_NATS_URL is set)
    meshward ask "question" [--thread ID] [--json]
    meshward train security|security-chargram|intent|all [--force] [--check] ...   build the classifiers (cached)
    meshward approve THREAD [--deny] [--reason TEXT]   decide a pending tool call
    meshward keys create NAME | list | revoke NAME   API keys of the HTTP ingress
    meshward credentials DIR         the closed bus for another deployment: a password file per service and nats-auth.conf
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import httpx


def _default_url() -> str:
    return os.environ.get("MESHWARD_URL") or f"http://127.0.0.1:{os.environ.get('MESHWARD_HTTP_PORT', '8080')}"


def cmd_up(args: argparse.Namespace) -> int:
    from .launcher import run_up

    port = int(os.environ.get("MESHWARD_HTTP_PORT", "8080"))
    return asyncio.run(run_up(Path(args.data_dir).resolve(), port, os.environ.get("MESHWARD_NATS_URL") or None))


def _post(args: argparse.Namespace, path: str, body: dict) -> httpx.Response | None:
    key = os.environ.get("MESHWARD_API_KEY")
    try:
        return httpx.post(f"{args.url}{path}", json=body, timeout=args.timeout, headers={"X-Api-Key": key} if key else None)
    except httpx.HTTPError as e:
        print(f"meshward is not reachable at {args.url} ({e}); start it with `make up`", file=sys.stderr)
        return None


def cmd_ask(args: argparse.Namespace) -> int:
    body = {"question": args.question}
    if args.thread:
        body["thread_id"] = args.thread
    r = _post(args, "/v1/ask", body)
    return 2 if r is None else _show(args, r)


def cmd_approve(args: argparse.Namespace) -> int:
    """Decide the tool call a thread's run waits on; the run continues and its answer is shown."""
    body = {"approved": not args.deny} | ({"reason": args.reason} if args.reason else {})
    r = _post(args, f"/v1/threads/{args.thread}/approval", body)
    return 2 if r is None else _show(args, r)


def _show(args: argparse.Namespace, r: httpx.Response) -> int:
    data = r.json()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0 if r.status_code == 200 else 1
    if r.status_code != 200:
        err = data.get("error", {})
        print(f"error {r.status_code}: {err.get('message', data)}", file=sys.stderr)
        return 1
    print(data["answer"])
    if data.get("approval"):
        a = data["approval"]
        print(f"\nwaiting for approval: {a['tool']} {json.dumps(a['arguments'])} ({a['reason']}); expires {a['expires_at']}")
        print(f"approve: meshward approve {data['thread_id']}    deny: meshward approve {data['thread_id']} --deny --reason '...'")
    extra = f" [{data['refusal_reason']}{': ' + data['threat_category'] if data.get('threat_category') else ''}]" if data.get("refusal_reason") else ""
    tier = f" · {data['tier']} tier" + (f" ({data['model']}, confidence {data['confidence']:.2f})" if data.get("model") and data.get("confidence") is not None else "") if data.get("tier") else ""
    print(f"\n{data['status']}{extra} · route: {' -> '.join(data['route'])} · tools: {', '.join(data['tools_used']) or '-'}{tier}")
    print(f"thread {data['thread_id']} · trace {data['trace_id']} · {data['duration_ms']:.1f} ms")
    return 0


TRAINABLE = {"security": "meshward.security_training", "security-chargram": "meshward.security_training.chargram",
             "intent": "meshward.intent_training"}


def cmd_train(args: argparse.Namespace) -> int:
    """Run each model's training module with this interpreter (the venv's); a cached model returns at once."""
    import subprocess

    names = list(TRAINABLE) if args.model == "all" else [args.model]
    for name in names:
        code = subprocess.call([sys.executable, "-m", TRAINABLE[name], *args.rest])
        if code != 0:
            print(f"meshward train {name} failed (exit {code})", file=sys.stderr)
            return code
    return 0


def cmd_credentials(args: argparse.Namespace) -> int:
    """Fresh credentials for a server `meshward up` does not start (compose, k8s): one 0600 password file per
    service and the server's `authorization` block (bcrypt hashes) to `include` from its configuration."""
    from meshward.bus.permissions import PERMISSIONS, generate_credentials, write_private

    creds = generate_credentials(Path(args.dir).resolve())
    conf = creds.directory / "nats-auth.conf"
    write_private(conf, creds.authorization)
    print(f"server authorization block: {conf}")
    for user in sorted(PERMISSIONS):
        print(f"{user}: MESHWARD_NATS_USER={user} MESHWARD_NATS_PASSWORD_FILE={creds.password_file(user)}")
    return 0


def _key_file(args: argparse.Namespace) -> Path:
    return Path(args.file or os.environ.get("MESHWARD_API_KEYS_FILE") or Path(os.environ.get("MESHWARD_DATA_DIR", "var")) / "api-keys.json")


def cmd_keys(args: argparse.Namespace) -> int:
    """API keys of the ingress: stored as SHA-256 digests; a new key is printed once."""
    import re

    from meshward.supervisor.auth import NAME_PATTERN, KeyFile

    store = KeyFile(_key_file(args).resolve())
    if args.action == "list":
        entries = store.list()
        for e in entries:
            print(f"{e['name']}\tcreated {e['created_at']}\t{'revoked ' + e['revoked_at'] if e.get('revoked_at') else 'active'}")
        if not entries:
            print(f"no keys in {store.path}")
        return 0
    if not args.name or not re.match(NAME_PATTERN, args.name):
        print("a key needs a NAME: letters, digits, '.', '_' or '-', at most 64 characters", file=sys.stderr)
        return 2
    if args.action == "create":
        try:
            key = store.create(args.name)
        except ValueError as e:
            print(str(e), file=sys.stderr)
            return 1
        print(key)
        print(f"key {args.name!r} stored as a digest in {store.path}; this is the only time it is shown. "
              "Send it as X-Api-Key or Authorization: Bearer.", file=sys.stderr)
        return 0
    if not store.revoke(args.name):
        print(f"no active key named {args.name!r} in {store.path}", file=sys.stderr)
        return 1
    print(f"revoked {args.name!r}: refused from the next request on", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meshward", description="meshward: a secure, scoped multi-agent assistant over NATS")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the whole system in the foreground")
    up.add_argument("--data-dir", default=os.environ.get("MESHWARD_DATA_DIR", "var"), help="where NATS, SQLite files and logs live (default: ./var)")
    up.set_defaults(fn=cmd_up)
    ask = sub.add_parser("ask", help="ask a running meshward a question")
    ask.add_argument("question")
    ask.add_argument("--thread", help="continue this thread id")
    ask.add_argument("--url", default=_default_url())
    ask.add_argument("--timeout", type=float, default=150.0)  # a deep-tier answer on CPU takes a while
    ask.add_argument("--json", action="store_true", help="print the whole response (MESHWARD_API_KEY: the key sent, if any)")
    ask.set_defaults(fn=cmd_ask)
    approve = sub.add_parser("approve", help="approve (or --deny) the tool call a thread's run is waiting on")
    approve.add_argument("thread")
    approve.add_argument("--deny", action="store_true")
    approve.add_argument("--reason")
    approve.add_argument("--url", default=_default_url())
    approve.add_argument("--timeout", type=float, default=150.0)
    approve.add_argument("--json", action="store_true", help="print the whole response")
    approve.set_defaults(fn=cmd_approve)
    train = sub.add_parser("train", help="build a fine-tuned classifier (security, intent or all); cached by a hash "
                                         "of its data and code", add_help=False)
    train.add_argument("model", choices=[*TRAINABLE, "all"])
    train.add_argument("rest", nargs=argparse.REMAINDER, help="passed on: --force, --check, --print-dir, --quiet, --scope FILE")
    train.set_defaults(fn=cmd_train)
    creds = sub.add_parser("credentials", help="write per-service NATS passwords and the server's authorization block")
    creds.add_argument("dir", help="folder for <service>.password files (0600) and nats-auth.conf")
    creds.set_defaults(fn=cmd_credentials)
    keys = sub.add_parser("keys", help="API keys of the HTTP ingress: create NAME (printed once), list, revoke NAME")
    keys.add_argument("action", choices=["create", "list", "revoke"])
    keys.add_argument("name", nargs="?")
    keys.add_argument("--file", help="the key file (default: $MESHWARD_API_KEYS_FILE or <data dir>/api-keys.json)")
    keys.set_defaults(fn=cmd_keys)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
