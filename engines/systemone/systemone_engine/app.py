"""The `/v1/systemone` HTTP contract (as Von and llama-server speak it) around one engine.

- `POST /v1/systemone`: `{"model"?, "state", "questions": {qid: {type, instructions, criteria}}}`
  → `{"model", "answers", "usage"}`. `model` is optional and ignored: the reply names the model
  loaded. `choice`, `score` and `noul` are answered. An engine reads a score as a choice over its
  levels' texts; the answer is Jev's score shape, whose `score` is the expected level.
- `POST /v1/systemone/batch`: Laya's batch shape, `{"states": [...], "questions": {...}}` →
  `{"results": [one reply per state], "total_usage"}`, answered in one batched pass.
- Both take `"embed": true` from engines that embed (MiniLM): each answer then also carries the
  `embedding` of the text it judged, so one pass serves a learned head and the answer.
- `POST /v1/embed`: `{"instructions"?, "type"?, "states": [...]}` → `{"model", "dim",
  "embeddings"}`, the same vectors for each state without answering, for a question of `type`
  (`choice` by default, `score` or `noul`; texts are states that are strings); 501 from engines without
  embeddings.
- `GET /health` names the engine, model and device; `GET /metrics` is Prometheus text.

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
import hmac
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .backends import DEFAULT_NOUL_TEXTS, Abandoned, Engine, Question, rounded, state_text

MAX_BODY_BYTES = 1_048_576
MAX_QUESTIONS = 16
MAX_OPTIONS = 256
MAX_STATES = 64
MAX_DEPTH = 32
DEFAULT_MAX_WORK = 250_000
TIMEOUT_HEADER = "x-system1-timeout-ms"

logger = logging.getLogger("systemone")
T = TypeVar("T")


class BadRequest(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


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


def create_app(engine: Engine, port: int, allowed_hosts: Iterable[str] = (), api_key: str = "",
               max_work: int = DEFAULT_MAX_WORK) -> Starlette:
    hosts = {"127.0.0.1", "localhost", "[::1]", *allowed_hosts}
    allowed = {h.lower() for h in hosts} | {f"{h}:{port}".lower() for h in hosts}
    slot = asyncio.Lock()  # one pass at a time: the gateway's lane queues and batches in front
    registry = CollectorRegistry()
    requests = Counter("systemone_requests", "Requests by endpoint and status.", ["endpoint", "status"], registry=registry)
    latency = Histogram("systemone_pass_seconds", "Inference time of one pass.", registry=registry,
                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
    states_per_pass = Histogram("systemone_pass_states", "States answered by one pass.", registry=registry,
                                buckets=(1, 2, 4, 8, 16, 32, 64))
    abandoned = Counter("systemone_abandoned_passes", "Passes stopped because the client left or its deadline passed.",
                        registry=registry)

    def refusal(request: Request) -> Response | None:
        if request.headers.get("host", "").lower() not in allowed:
            return error(403, f"Host {request.headers.get('host')!r} is not allowed", "host")
        if api_key:
            presented = request.headers.get("authorization", "")
            if not hmac.compare_digest(presented.encode(), f"Bearer {api_key}".encode()):
                return error(401, "missing or invalid bearer token", None, {"WWW-Authenticate": "Bearer"})
        return None

    async def guarded(request: Request, endpoint: str) -> Response:
        response = refusal(request) or await _answer(request, endpoint)
        requests.labels(endpoint, str(response.status_code)).inc()
        return response

    async def _answer(request: Request, endpoint: str) -> Response:
        if endpoint == "health":
            return JSONResponse({"status": "ok", "engine": engine.name, "model": engine.model, "device": engine.device,
                                 "max_options": min(MAX_OPTIONS, engine.max_options), "batch": True,
                                 "embeds": engine.embeds})
        if endpoint == "embed" and not engine.embeds:
            return error(501, f"the {engine.name} engine has no embeddings", None)
        try:
            if endpoint == "embed":
                instructions, kind, states = await parse_embed(request)
            else:
                states, questions, embed = await parse(request, endpoint == "batch")
        except BadRequest as exc:
            return error(exc.status, exc.message, exc.field)
        try:
            if endpoint == "embed":
                vectors = await run(request, len(states), lambda stop: engine.embed(instructions, states, stop, kind))
                return JSONResponse({"model": engine.model, "dim": int(vectors.shape[1]),
                                     "embeddings": [rounded(v) for v in vectors]})
            answers, tokens = await run(request, len(states), lambda stop: engine.answer(states, questions, stop, embed))
        except Abandoned:
            abandoned.inc()
            return error(503, "stopped: the client left or its deadline passed", None)
        except Exception as exc:  # the engine's own failure is still a JSON answer
            logger.exception("the engine failed")
            return error(500, f"the engine failed ({type(exc).__name__})", None)
        replies = [{"model": engine.model, "answers": a, "usage": {"input_tokens": tokens // len(states), "output_tokens": 0}}
                   for a in answers]
        if endpoint == "batch":
            return JSONResponse({"results": replies, "total_usage": {"input_tokens": tokens, "output_tokens": 0}})
        return JSONResponse(replies[0])

    async def body_of(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            raise BadRequest(413, f"body over {MAX_BODY_BYTES} bytes")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise BadRequest(413, f"body over {MAX_BODY_BYTES} bytes")
        return read_json(body)

    def states_of(payload: dict[str, Any]) -> list[Any]:
        states = payload.get("states")
        if not isinstance(states, list) or not states:
            raise BadRequest(422, "states must be a non-empty array", "states")
        if len(states) > MAX_STATES:
            raise BadRequest(413, f"at most {MAX_STATES} states per request (got {len(states)})", "states")
        return [check_state(s, f"states.{i}") for i, s in enumerate(states)]

    def within_budget(work: int, field: str) -> None:
        if work > max_work:
            raise BadRequest(413, f"needs {work:,} characters of work, over this engine's budget of {max_work:,}", field)

    async def parse(request: Request, batch: bool) -> tuple[list[Any], list[Question], bool]:
        payload = await body_of(request)
        questions = parse_questions(payload.get("questions"), engine.max_options)
        states = states_of(payload) if batch else [check_state(payload.get("state"), "state")]
        embed = payload.get("embed", False)
        if not isinstance(embed, bool):
            raise BadRequest(422, "embed must be true or false", "embed")
        if embed and not engine.embeds:
            raise BadRequest(422, f"the {engine.name} engine has no embeddings", "embed")
        within_budget(work_of(states, questions), "questions")
        return states, questions, embed

    async def parse_embed(request: Request) -> tuple[str, str, list[Any]]:
        payload = await body_of(request)
        instructions = payload.get("instructions", "")
        if not isinstance(instructions, str):
            raise BadRequest(422, "instructions must be a string", "instructions")
        kind = payload.get("type", "choice")
        if kind not in ("choice", "score", "noul"):
            raise BadRequest(422, f"type must be 'choice', 'score' or 'noul', not {kind!r}", "type")
        states = states_of(payload)
        within_budget(sum(len(instructions) + len(state_text(s)) for s in states), "states")
        return instructions, kind, states

    async def run(request: Request, count: int, work: Callable[[Callable[[], bool]], T]) -> T:
        """One pass over `count` states, stopped between steps once the client has gone or the
        deadline has passed."""
        deadline = deadline_of(request)
        gone = threading.Event()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone.set()

        def stop() -> bool:
            return gone.is_set() or (deadline is not None and time.monotonic() > deadline)

        watcher = asyncio.ensure_future(watch())
        try:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                await asyncio.wait_for(slot.acquire(), wait)
            except TimeoutError:
                raise Abandoned from None
            try:
                if stop():
                    raise Abandoned
                started = time.perf_counter()
                result = await asyncio.to_thread(work, stop)
                latency.observe(time.perf_counter() - started)
                states_per_pass.observe(count)
                return result
            finally:
                slot.release()
        finally:
            watcher.cancel()

    async def decide(request: Request) -> Response:
        return await guarded(request, "decide")

    async def batch(request: Request) -> Response:
        return await guarded(request, "batch")

    async def embed(request: Request) -> Response:
        return await guarded(request, "embed")

    async def health(request: Request) -> Response:
        return await guarded(request, "health")

    async def metrics(request: Request) -> Response:
        return refusal(request) or Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        allow = (getattr(exc, "headers", None) or {}).get("Allow")
        return error(status, f"{request.method} {request.url.path}: {'not found' if status == 404 else 'method not allowed'}",
                     None, {"Allow": allow} if allow else None)

    return Starlette(
        routes=[
            Route("/v1/systemone", decide, methods=["POST"]),
            Route("/v1/systemone/batch", batch, methods=["POST"]),
            Route("/v1/embed", embed, methods=["POST"]),
            Route("/health", health),
            Route("/metrics", metrics),
        ],
        exception_handlers={404: not_found, 405: not_found},
    )
