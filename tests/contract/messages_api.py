"""A local stand-in for the Anthropic Messages API, as Claude Code calls it (`POST /v1/messages`,
streamed or not): it records each request body and ends every turn with one short text, in the
documented event sequence (message_start, content_block_start/delta/stop, message_delta,
message_stop). Token counting answers a fixed count; anything else is a 404."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "done"


def _events(model: str) -> bytes:
    message = {"id": "msg_local", "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": REPLY}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


@contextlib.contextmanager
def messages_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve on a free loopback port; yields the base URL and the list the request bodies go to."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            path = self.path.split("?", 1)[0]
            if path == "/v1/messages/count_tokens":
                self._send(200, b'{"input_tokens": 1}', "application/json")
            elif path == "/v1/messages":
                bodies.append(payload)
                if payload.get("stream"):
                    self._send(200, _events(payload.get("model", "")), "text/event-stream")
                else:
                    message = {"id": "msg_local", "type": "message", "role": "assistant", "model": payload.get("model", ""),
                               "content": [{"type": "text", "text": REPLY}], "stop_reason": "end_turn",
                               "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
                    self._send(200, json.dumps(message).encode(), "application/json")
            else:
                self._send(404, b'{"type": "error", "error": {"type": "not_found_error", "message": "no such route"}}',
                           "application/json")

        def do_GET(self) -> None:
            self._send(404, b"{}", "application/json")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
