"""A real HTTP server on loopback that speaks the chat-completions API and replays scripted replies.

Each scripted reply is a dict: {"content": str} for a normal answer (optionally "finish_reason", "delay"),
{"status": int, "body": ...} for an HTTP error (optionally "headers", e.g. {"Retry-After": "1"}), or {"raw": str}
for a malformed body. GET /v1/models lists `models` (not scripted; 404 when models is None). Requests are
recorded (headers, JSON and the time they arrived) so tests can assert what the client sent. Nothing leaves
127.0.0.1.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    def __init__(self, script: list[dict], models: list[str] | None = None):
        self.script = list(script)
        self.models = models
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                with server._lock:
                    server.requests.append({"path": self.path, "method": "GET", "at": time.monotonic(),
                                            "headers": {k.lower(): v for k, v in self.headers.items()}, "json": None})
                if not self.path.endswith("/models") or server.models is None:
                    return self._send(404, {"error": {"message": "not found"}})
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                             "owned_by": "test"} for m in server.models]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                with server._lock:
                    server.requests.append({"path": self.path, "method": "POST", "at": time.monotonic(), "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "json": json.loads(body or b"{}")})
                    step = server.script.pop(0) if server.script else {"status": 500, "body": {"error": "script exhausted"}}
                if step.get("delay"):
                    time.sleep(step["delay"])
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                if "status" in step:
                    return self._send(step["status"], step.get("body", {"error": {"message": "scripted"}}),
                                      headers=step.get("headers", {}))
                if "raw" in step:
                    return self._send(200, step["raw"], raw=True)
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": server.requests[-1]["json"].get("model", "m"),
                    "choices": [{"index": 0, "finish_reason": step.get("finish_reason", "stop"),
                                 "message": {"role": "assistant", "content": step["content"]}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, status, payload, raw=False, headers=None):
                data = payload.encode() if raw else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ChatServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
