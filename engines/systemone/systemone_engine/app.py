"""The `/v1/systemone` HTTP contract (as Von and llama-server speak it) around one engine.

- `POST /v1/systemone`: `{"model"?, "state", "questions": {qid: {type, instructions, criteria}}}`
  → `{"model", "answers", "usage"}`. `model` is optional and ignored: the reply names the model
  loaded. `choice`, `score` and `noul` are answered. An engine reads a score as a choice over its
  levels' texts; the answer is Jev's score shape, whose `score` is the expected level.
- `POST /v1/systemone/batch`: Laya's batch shape, `{"states": [...], "questions": {...}}` →
  `{"results": [one reply per state], "total_usage"}`, answered in one batched pass.
- Both take `"embed": true` from engines that embed (MiniLM): each answer then also carries the
  `embedding` of the text it judged, so one pass serves a learned head and the answer.
- A `noul` answer that MiniLM gives from the text's closeness to the question alone (no
  `criteria` of its own) carries `"relevance": true`: it reads the same for a question and its
  opposite, and the gateway takes it as an answer only through a head or that question's fit.
- `POST /v1/embed`: `{"instructions"?, "type"?, "model"?, "states": [...]}` → `{"model", "dim",
  "embeddings"}`, the same vectors for each state without answering, for a question of `type`
  (`choice` by default, `score` or `noul`; texts are states that are strings), from the
  embedding model `model` names: the engine's own by default, or one of the server's
  embedders (`--embedders`); 501 when the server has no embeddings at all.
- `GET /health` names the engine, model and device, and the embedding models (`embedders`);
  `GET /metrics` is Prometheus text.

Protection, since any local process (and a web page, through DNS rebinding) can reach loopback:
only allowed `Host` values, bodies that are JSON objects of at most 1 MB (no NaN, no lone
surrogates, nested at most 32 levels), at most 16 questions and 256 options, a work budget per
request (`max_work` characters: for every state and question, the state, the instructions and
every option), and a bearer token when `SYSTEM1_SYSTEMONE_API_KEY` is set (`/metrics` too).
Work whose client has gone, or whose deadline (`X-System1-Timeout-Ms`, sent by the gateway)
has passed, is stopped between encoder steps and answered 503. Every error, an engine failure
included, is JSON: `{"error": {"message", "field"}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import numpy as np

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .backends import DEFAULT_NOUL_TEXTS, Abandoned, Engine, Question, Stop, rounded, state_text

MAX_BODY_BYTES = 1_048_576
MAX_QUESTIONS = 16
MAX_OPTIONS = 256
MAX_STATES = 64
MAX_DEPTH = 32
DEFAULT_MAX_WORK = 250_000
TIMEOUT_HEADER = "x-system1-timeout-ms"

logger = logging.getLogger("systemone")
T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]


class ErrorReply(Exception):
    """An error answered as JSON, `{"error": {"message", "field"}}` with `status`."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


class BadRequest(ErrorReply):
    """A request refused for what it asks (4xx); the engine's own failures are `ErrorReply`s."""


def error(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "field": field}}, status_code=status, headers=headers)


def parse_questions(raw: Any, max_options: int) -> list[Question]:
    if not isinstance(raw, dict) or not raw:
        raise BadRequest(422, "questions must be a non-empty object", "questions")
    if len(raw) > MAX_QUESTIONS:
        raise BadRequest(413, f"at most {MAX_QUESTIONS} questions per request (got {len(raw)})", "questions")
    limit = min(MAX_OPTIONS, max_options)
    parsed = []
    for qid, spec in raw.items():
        field = f"questions.{qid}"
        if not isinstance(spec, dict):
            raise BadRequest(422, "a question must be an object", field)
        kind = spec.get("type", "choice")
        instructions = spec.get("instructions")
        if isinstance(instructions, (dict, list)):
            instructions = json.dumps(instructions, ensure_ascii=False)
        if not isinstance(instructions, str) or not instructions.strip():
            raise BadRequest(422, "instructions must be a non-empty string, object or array", f"{field}.instructions")
        criteria = spec.get("criteria")
        if kind == "choice":
            if isinstance(criteria, list):
                criteria = {label: None for label in criteria}
            if not isinstance(criteria, dict) or len(criteria) < 2:
                raise BadRequest(422, "a choice needs criteria with at least 2 options", f"{field}.criteria")
            if len(criteria) > limit:
                raise BadRequest(422, f"at most {limit} options are supported (got {len(criteria)})", f"{field}.criteria")
            labels = tuple(str(label) for label in criteria)
            texts = tuple(str(d) if isinstance(d, str) and d.strip() else label for label, d in zip(labels, criteria.values()))
        elif kind == "score":
            if (not isinstance(criteria, list) or not 2 <= len(criteria) <= limit
                    or not all(isinstance(level, str) and level.strip() for level in criteria)):
                raise BadRequest(422, f"a score needs criteria: a list of 2 to {limit} level texts, lowest first",
                                 f"{field}.criteria")
            labels = tuple(str(index) for index in range(len(criteria)))
            texts = tuple(criteria)
        elif kind == "noul":
            criteria = criteria or {}
            if not isinstance(criteria, dict) or set(criteria) - {"true", "false"}:
                raise BadRequest(422, "noul criteria may only have 'true' and 'false'", f"{field}.criteria")
            labels = ("true", "false")
            texts = (str(criteria.get("true") or DEFAULT_NOUL_TEXTS[0]), str(criteria.get("false") or DEFAULT_NOUL_TEXTS[1]))
        else:
            raise BadRequest(422, f"this engine answers 'choice', 'score' and 'noul' questions, not {kind!r}",
                             f"{field}.type")
        parsed.append(Question(str(qid), kind, instructions, labels, texts))
    return parsed


def read_json(body: bytes) -> Any:
    """The body as JSON, or `BadRequest` saying why not."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        payload = json.loads(body, parse_constant=no_constant)
    except RecursionError:
        raise BadRequest(400, f"body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"body must be valid JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise BadRequest(400, "body must be a JSON object")
    walk(payload, "", 0)
    return payload


def walk(value: Any, field: str, depth: int) -> None:
    """Refuse nesting past `MAX_DEPTH` and text that is not Unicode (lone surrogates)."""
    if depth > MAX_DEPTH:
        raise BadRequest(400, f"nests deeper than {MAX_DEPTH} levels", field or None)
    if isinstance(value, str):
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            raise BadRequest(400, "text holds a lone surrogate, which is not Unicode", field or None)
    elif isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(400, "not a finite number", field or None)
    elif isinstance(value, dict):
        for key, item in value.items():
            walk(key, field, depth + 1)
            walk(item, f"{field}.{key}".lstrip("."), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            walk(item, f"{field}.{index}".lstrip("."), depth + 1)


def work_of(states: list[Any], questions: list[Question]) -> int:
    """Characters one pass reads: for every state and question, the state, the instructions and
    every option."""
    per_state = sum(len(q.instructions) + sum(len(t) for t in q.texts) for q in questions)
    return sum(len(state_text(s)) * len(questions) + per_state for s in states)


def deadline_of(request: Request) -> float | None:
    raw = request.headers.get(TIMEOUT_HEADER, "")
    if not raw.isdigit():
        return None
    return time.monotonic() + min(int(raw), 600_000) / 1000


def check_state(state: Any, field: str) -> Any:
    if state is None or not isinstance(state, (str, dict, list)):
        raise BadRequest(422, "state must be a string, an object or an array", field)
    return state


def single_state(payload: dict[str, Any]) -> list[Any]:
    """A `/v1/systemone` body's one state, as the list a pass takes."""
    return [check_state(payload.get("state"), "state")]


def states_of(payload: dict[str, Any]) -> list[Any]:
    states = payload.get("states")
    if not isinstance(states, list) or not states:
        raise BadRequest(422, "states must be a non-empty array", "states")
    if len(states) > MAX_STATES:
        raise BadRequest(413, f"at most {MAX_STATES} states per request (got {len(states)})", "states")
    return [check_state(s, f"states.{i}") for i, s in enumerate(states)]


def within_budget(work: int, max_work: int, field: str) -> None:
    if work > max_work:
        raise BadRequest(413, f"needs {work:,} characters of work, over this engine's budget of {max_work:,}", field)


async def read_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object; reading stops past `MAX_BODY_BYTES`, whatever the client declared."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise BadRequest(413, f"body over {MAX_BODY_BYTES} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise BadRequest(413, f"body over {MAX_BODY_BYTES} bytes")
    return read_json(body)


def parse_embed(payload: dict[str, Any], max_work: int, models: Iterable[str]) -> tuple[str, str, str | None, list[Any]]:
    """A `/v1/embed` body's instructions, question type, embedding model (one of `models`, or
    None for the default) and states."""
    instructions = payload.get("instructions", "")
    if not isinstance(instructions, str):
        raise BadRequest(422, "instructions must be a string", "instructions")
    kind = payload.get("type", "choice")
    if kind not in ("choice", "score", "noul"):
        raise BadRequest(422, f"type must be 'choice', 'score' or 'noul', not {kind!r}", "type")
    model = payload.get("model")
    if model is not None and model not in models:
        raise BadRequest(422, f"model {model!r} is not an embedding model here; these are: {', '.join(models)}", "model")
    states = states_of(payload)
    within_budget(sum(len(instructions) + len(state_text(s)) for s in states), max_work, "states")
    return instructions, kind, model, states


def usage(input_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": 0}


def host_values(port: int, extra: Iterable[str]) -> set[str]:
    """`Host` headers answered: loopback names and `extra`, each with and without the port."""
    hosts = {"127.0.0.1", "localhost", "[::1]", *extra}
    return {h.lower() for h in hosts} | {f"{h}:{port}".lower() for h in hosts}


async def not_found(request: Request, exc: Exception) -> Response:
    """404 and 405 in the same JSON error shape as everything else, 405 keeping its `Allow`."""
    status = getattr(exc, "status_code", 404)
    allow = (getattr(exc, "headers", None) or {}).get("Allow")
    return error(status, f"{request.method} {request.url.path}: {'not found' if status == 404 else 'method not allowed'}",
                 None, {"Allow": allow} if allow else None)


class PassStop:
    """A pass's `stop()`: true once its client has gone or its deadline has passed. The engine
    asks it between encoder steps from its worker thread, hence a thread-safe event."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.gone = threading.Event()

    def __call__(self) -> bool:
        return self.gone.is_set() or (self.deadline is not None and time.monotonic() > self.deadline)

    async def watch(self, request: Request) -> None:
        """Mark the client gone once it disconnects."""
        while (await request.receive())["type"] != "http.disconnect":
            pass
        self.gone.set()


class Metrics:
    """The server's Prometheus series, in a registry of its own so that apps never share counts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("systemone_requests", "Requests by endpoint and status.", ["endpoint", "status"],
                                registry=self.registry)
        self.latency = Histogram("systemone_pass_seconds", "Inference time of one pass.", registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.states_per_pass = Histogram("systemone_pass_states", "States answered by one pass.", registry=self.registry,
                                         buckets=(1, 2, 4, 8, 16, 32, 64))
        self.abandoned = Counter("systemone_abandoned_passes",
                                 "Passes stopped because the client left or its deadline passed.", registry=self.registry)


class Embedder(Protocol):
    model: str

    def embed(self, instructions: str, states: list[Any], stop: Stop, kind: str) -> np.ndarray: ...


class EngineServer:
    """One engine behind the contract: who may ask, one pass at a time, and what was answered."""

    def __init__(self, engine: Engine, port: int, allowed_hosts: Iterable[str], api_key: str, max_work: int,
                 embedders: Iterable[Embedder] = ()) -> None:
        self.engine, self.api_key, self.max_work = engine, api_key, max_work
        #: Embedding models by id, the engine's own first (the default).
        self.embedders: dict[str, Embedder] = {e.model: e for e in ([engine] if engine.embeds else []) + list(embedders)}
        self.allowed = host_values(port, allowed_hosts)
        self.slot = asyncio.Lock()  # one pass at a time: the gateway's lane queues and batches in front
        self.metrics = Metrics()

    def refusal(self, request: Request) -> Response | None:
        if request.headers.get("host", "").lower() not in self.allowed:
            return error(403, f"Host {request.headers.get('host')!r} is not allowed", "host")
        if self.api_key:
            presented = request.headers.get("authorization", "")
            if not hmac.compare_digest(presented.encode(), f"Bearer {self.api_key}".encode()):
                return error(401, "missing or invalid bearer token", None, {"WWW-Authenticate": "Bearer"})
        return None

    def guarded(self, endpoint: str, answer: Handler) -> Handler:
        """`answer` behind the Host and token checks, its `ErrorReply` as JSON, every reply
        counted under `endpoint`."""

        async def handle(request: Request) -> Response:
            try:
                response = self.refusal(request) or await answer(request)
            except ErrorReply as exc:
                response = error(exc.status, exc.message, exc.field)
            self.metrics.requests.labels(endpoint, str(response.status_code)).inc()
            return response

        return handle

    async def health(self, request: Request) -> Response:
        engine = self.engine
        return JSONResponse({"status": "ok", "engine": engine.name, "model": engine.model, "device": engine.device,
                             "max_options": min(MAX_OPTIONS, engine.max_options), "batch": True,
                             "embeds": engine.embeds, "embedders": list(self.embedders)})

    async def decide(self, request: Request) -> Response:
        replies, _ = await self.replies(request, single_state)
        return JSONResponse(replies[0])

    async def batch(self, request: Request) -> Response:
        replies, tokens = await self.replies(request, states_of)
        return JSONResponse({"results": replies, "total_usage": usage(tokens)})

    async def embed(self, request: Request) -> Response:
        if not self.embedders:  # before the body is read: no body makes this server embed
            return error(501, f"the {self.engine.name} engine has no embeddings", None)
        instructions, kind, model, states = parse_embed(await read_body(request), self.max_work, self.embedders)
        embedder = self.embedders[model] if model else next(iter(self.embedders.values()))
        with self.engine_failures():
            vectors = await self.run(request, len(states), lambda stop: embedder.embed(instructions, states, stop, kind))
            return JSONResponse({"model": embedder.model, "dim": int(vectors.shape[1]),
                                 "embeddings": [rounded(v) for v in vectors]})

    async def metrics_text(self, request: Request) -> Response:
        return self.refusal(request) or Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def replies(self, request: Request,
                      states_from: Callable[[dict[str, Any]], list[Any]]) -> tuple[list[dict[str, Any]], int]:
        """One reply per state `states_from` finds in the body, and the input tokens the pass read."""
        engine = self.engine
        payload = await read_body(request)
        questions = parse_questions(payload.get("questions"), engine.max_options)
        states = states_from(payload)
        embed = payload.get("embed", False)
        if not isinstance(embed, bool):
            raise BadRequest(422, "embed must be true or false", "embed")
        if embed and not engine.embeds:
            raise BadRequest(422, f"the {engine.name} engine has no embeddings", "embed")
        within_budget(work_of(states, questions), self.max_work, "questions")
        with self.engine_failures():
            answers, tokens = await self.run(request, len(states), lambda stop: engine.answer(states, questions, stop, embed))
        return [{"model": engine.model, "answers": a, "usage": usage(tokens // len(states))} for a in answers], tokens

    @contextlib.contextmanager
    def engine_failures(self) -> Iterator[None]:
        """The engine's failures as replies too: 503 when its pass was stopped, 500 otherwise."""
        try:
            yield
        except Abandoned:
            self.metrics.abandoned.inc()
            raise ErrorReply(503, "stopped: the client left or its deadline passed") from None
        except Exception as exc:
            logger.exception("the engine failed")
            raise ErrorReply(500, f"the engine failed ({type(exc).__name__})") from None

    async def run(self, request: Request, count: int, work: Callable[[Stop], T]) -> T:
        """One pass over `count` states, stopped between steps once the client has gone or the
        deadline has passed; the deadline also bounds the wait for the slot."""
        deadline = deadline_of(request)
        stop = PassStop(deadline)
        watcher = asyncio.ensure_future(stop.watch(request))
        try:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                await asyncio.wait_for(self.slot.acquire(), wait)
            except TimeoutError:
                raise Abandoned from None
            try:
                if stop():
                    raise Abandoned
                started = time.perf_counter()
                result = await asyncio.to_thread(work, stop)
                self.metrics.latency.observe(time.perf_counter() - started)
                self.metrics.states_per_pass.observe(count)
                return result
            finally:
                self.slot.release()
        finally:
            watcher.cancel()


def create_app(engine: Engine, port: int, allowed_hosts: Iterable[str] = (), api_key: str = "",
               max_work: int = DEFAULT_MAX_WORK, embedders: Iterable[Embedder] = ()) -> Starlette:
    server = EngineServer(engine, port, allowed_hosts, api_key, max_work, embedders)
    return Starlette(
        routes=[
            Route("/v1/systemone", server.guarded("decide", server.decide), methods=["POST"]),
            Route("/v1/systemone/batch", server.guarded("batch", server.batch), methods=["POST"]),
            Route("/v1/embed", server.guarded("embed", server.embed), methods=["POST"]),
            Route("/health", server.guarded("health", server.health)),
            Route("/metrics", server.metrics_text),  # refused like the rest, but not counted
        ],
        exception_handlers={404: not_found, 405: not_found},
    )
