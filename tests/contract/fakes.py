"""A faithful fake of an engine that does not run here yet, built from its documented contract
(`reference/engines.md`): Von 1.3 (`von serve`). It validates requests as the real server does
and answers in its exact shape; the choice is always the first option."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _uniform(labels: list[str]) -> dict[str, float]:
    return {label: round(1 / len(labels), 4) for label in labels}


def von_app(api_key: str = "") -> Starlette:
    """von-sdk 1.3.7: any `model` accepted and ignored, replies as "von-1.3.0"; a question with
    no type is a choice; noul answers are banded with the raw probability in `noul_raw`; request
    validation is FastAPI's 422 list, every engine error a 422 `{"detail": str}`."""

    async def decide(request: Request) -> JSONResponse:
        if api_key and request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"detail": "Missing or invalid Bearer token"}, status_code=401)
        body = await request.json()
        if "state" not in body:
            return JSONResponse({"detail": [{"type": "missing", "loc": ["body", "state"], "msg": "Field required"}]}, status_code=422)
        answers = {}
        for qid, q in body.get("questions", {}).items():
            kind = q.get("type", "choice")
            if kind == "choice":
                labels = list(q["criteria"])
                answers[qid] = {"type": "choice", "choice": labels[0], "probabilities": _uniform(labels), "confidence": 0.0}
            elif kind == "noul":
                raw = 0.7
                answers[qid] = {"type": "noul", "noul": round(0.8 + 0.1 * (raw - 0.5), 4), "noul_raw": raw}
            else:
                return JSONResponse({"detail": f"Unknown question type '{kind}'"}, status_code=422)
        return JSONResponse({"model": "von-1.3.0", "answers": answers,
                             "usage": {"input_tokens": 10, "output_tokens": len(answers)}, "truncation": None})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "service": "von-decision-server", "version": "1.3.7", "engine": "von-1.3"})

    return Starlette(routes=[Route("/v1/systemone", decide, methods=["POST"]), Route("/health", health), Route("/", health)])
