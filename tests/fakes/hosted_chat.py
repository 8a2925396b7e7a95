"""A stand-in for a hosted chat API (OpenRouter, OpenAI, Anthropic), served for real on a free
loopback port, speaking both documented wire shapes:

- `POST /v1/chat/completions`: a `chat.completion`, or with `stream` the `chat.completion.chunk`
  events ending `data: [DONE]`, the usage chunk (empty `choices`) before it when
  `stream_options.include_usage` is set; the key as `Authorization: Bearer`.
- `POST /v1/messages`: an Anthropic `message`, or with `stream` its event sequence
  (message_start … message_stop) with usage in message_start and message_delta; the key as
  `x-api-key`.

Faults are queued per model, each used by one request: `"429"`, `"500"`, `"503"`; `"slow:S"`
(S seconds before the status); `"break"` (a stream that stops after its first event, the
connection dropped); `"echo"` (a 400 that repeats the key it was sent, as some APIs' refusals
do); `"notjson"` (a 200 whose body is an HTML page); `"big:N"` (an answer, or with `stream` one
event, padded to N bytes); `"gate"` (a stream that sends its first event, then waits until the test
sets `gate`: a router that buffered would never deliver the first event). Every request is kept
(path, headers, body) for the tests to read, and `GET /_received` lists the models asked;
`POST /_faults {"model", "faults": [...]}` queues faults from outside the process.

    python hosted_chat.py --port 8000     # served on 0.0.0.0, as the stack tests run it
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

INPUT_TOKENS = 11
OUTPUT_TOKENS = 7


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class HostedChat:
    url: str = ""
    key: str = ""
    faults: dict[str, deque[str]] = field(default_factory=lambda: defaultdict(deque))
    received: list[Received] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    #: Set once the server is up and answering.
    ready: threading.Event = field(default_factory=threading.Event)

    def fail(self, model: str, *faults: str) -> None:
        self.faults[model].extend(faults)

    def models_asked(self) -> list[str]:
        return [r.body.get("model") for r in self.received]


def reply_text(model: str) -> str:
    return f"answer from {model}"


def _openai_message(model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply_text(model)},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                      "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}}


def _openai_events(model: str, usage: bool) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    words = reply_text(model).split(" ")
    chunks = [chunk({"role": "assistant", "content": ""}, None)]
    chunks += [chunk({"content": (" " if i else "") + w}, None) for i, w in enumerate(words)]
    chunks.append(chunk({}, "stop"))
    if usage:
        chunks.append({**chunk({}, None), "choices": [], "usage": _openai_message(model)["usage"]})
    return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


def _anthropic_message(model: str) -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": reply_text(model)}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}}


def _anthropic_events(model: str) -> list[str]:
    start = {**_anthropic_message(model), "content": [], "stop_reason": None,
             "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}}
    words = reply_text(model).split(" ")
    events = [("message_start", {"type": "message_start", "message": start}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": (" " if i else "") + w}})
               for i, w in enumerate(words)]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": OUTPUT_TOKENS}}),
               ("message_stop", {"type": "message_stop"})]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]


class _Broken(Exception):
    """Raised inside a stream: the server drops the connection mid-response."""


def app_for(state: HostedChat) -> Starlette:
    async def chat(request: Request) -> Response:
        api = "anthropic" if request.url.path == "/v1/messages" else "openai"
        body = await request.json()
        state.received.append(Received(request.url.path, dict(request.headers), body))
        presented = request.headers.get("x-api-key") if api == "anthropic" else \
            request.headers.get("authorization", "").removeprefix("Bearer ")
        if state.key and presented != state.key:
            error = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}} \
                if api == "anthropic" else {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
            return JSONResponse(error, status_code=401)
        model = str(body.get("model"))
        fault = state.faults[model].popleft() if state.faults[model] else ""
        if fault.startswith("slow:"):
            await asyncio.sleep(float(fault[5:]))
        elif fault == "echo":
            return JSONResponse({"error": {"message": f"bad request for key {presented}", "type": "invalid_request_error"}},
                                status_code=400)
        elif fault == "notjson":
            return Response("<html><body>Bad gateway</body></html>", media_type="text/html")
        elif fault.isdigit():
            return JSONResponse({"error": {"message": f"injected {fault}", "type": "server_error"}}, status_code=int(fault))
        pad = "x" * int(fault[4:]) if fault.startswith("big:") else ""
        if not body.get("stream"):
            answer = _anthropic_message(model) if api == "anthropic" else _openai_message(model)
            return JSONResponse({**answer, "pad": pad} if pad else answer)
        events = _anthropic_events(model) if api == "anthropic" else \
            _openai_events(model, bool((body.get("stream_options") or {}).get("include_usage")))

        async def stream() -> AsyncIterator[bytes]:
            yield events[0].encode()
            if fault == "break":
                raise _Broken
            if fault == "gate":
                await asyncio.to_thread(state.gate.wait, 60)
            if pad:
                yield f"data: {json.dumps({'pad': pad})}\n\n".encode()
            for event in events[1:]:
                yield event.encode()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def received(request: Request) -> Response:
        return JSONResponse({"models": state.models_asked()})

    async def faults(request: Request) -> Response:
        order = await request.json()
        state.fail(str(order["model"]), *map(str, order["faults"]))
        return JSONResponse({"queued": list(state.faults[str(order["model"])])})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.ready.set()
        yield

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/messages", chat, methods=["POST"]),
                             Route("/_received", received, methods=["GET"]),
                             Route("/_faults", faults, methods=["POST"])], lifespan=lifespan)


@contextlib.contextmanager
def hosted_chat(key: str = "") -> Iterator[HostedChat]:
    """The fake served on a free loopback port until the block ends."""
    state = HostedChat(key=key)
    server = uvicorn.Server(uvicorn.Config(app_for(state), log_config=None, lifespan="on"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    state.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if not state.ready.wait(30):
            raise RuntimeError("the fake hosted chat API did not start")
        yield state
    finally:
        state.gate.set()
        server.should_exit = True
        thread.join(30)
        sock.close()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    uvicorn.run(app_for(HostedChat()), host="0.0.0.0", port=parser.parse_args().port, log_config=None)
