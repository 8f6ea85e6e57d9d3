"""A loopback OpenAI-compatible chat-completions server with a scripted behaviour per request: answers
(plain or streamed as server-sent events), tool calls, HTTP errors with headers, hangs, malformed JSON and
streams that break or go quiet half-way. One instance is one provider of a chain."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    kind: str = "ok"  # ok | status | hang | malformed | empty | stream_hang | stream_broken | garbage_stream
    text: str = "Load average counts tasks waiting for I/O too."
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments as JSON text)


def _completion(model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in enumerate(reply.tool_calls)]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class FakeOpenAI:
    def __init__(self, script: list[Reply] | None = None, default: Reply | None = None, model: str = "fake-model"):
        self.script = list(script or [])
        self.default = default or Reply()
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = threading.Event()  # ends every hang (at teardown)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                with outer._lock:
                    outer.requests.append(request)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = outer.script.pop(0) if outer.script else outer.default
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                outer._serve(self, request, reply)

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None):
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def _serve(self, h: BaseHTTPRequestHandler, request: dict[str, Any], reply: Reply) -> None:
        model = self.model
        try:
            if reply.kind == "status":
                h._send(reply.status, {"error": {"message": f"scripted {reply.status}", "type": "scripted"}}, reply.headers)
            elif reply.kind == "hang":
                self.release.wait(60)
            elif reply.kind == "malformed":
                h._send(200, None, raw=b'{"id": "chatcmpl-1", "choices": [{"index": 0, "mess')
            elif reply.kind == "empty":
                h._send(200, _completion(model, Reply(text="")))
            elif not request.get("stream"):
                h._send(200, _completion(model, reply))
            else:
                self._stream(h, model, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream(self, h: BaseHTTPRequestHandler, model: str, reply: Reply) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        words = reply.text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        h.wfile.write(_chunk(model, {"role": "assistant", "content": ""}))
        for i, piece in enumerate(pieces):
            h.wfile.write(_chunk(model, {"content": piece}))
            h.wfile.flush()
            if i == 1 and reply.kind == "stream_hang":
                self.release.wait(60)
                return
            if i == 1 and reply.kind == "stream_broken":
                return  # the connection closes mid-answer: no finish_reason, no [DONE]
            if i == 1 and reply.kind == "garbage_stream":
                h.wfile.write(b"data: {not json at all\n\n")
                h.wfile.flush()
                return
        for i, (name, arguments) in enumerate(reply.tool_calls):
            half = len(arguments) // 2
            h.wfile.write(_chunk(model, {"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                                           "function": {"name": name, "arguments": arguments[:half]}}]}))
            h.wfile.write(_chunk(model, {"tool_calls": [{"index": i, "function": {"arguments": arguments[half:]}}]}))
        h.wfile.write(_chunk(model, {}, "tool_calls" if reply.tool_calls else "stop"))
        h.wfile.write(_chunk(model, None, usage={"prompt_tokens": 11, "completion_tokens": len(pieces)}))
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def dead_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"
