"""A simulated `/v1/systemone` engine with one slot and a batch endpoint, for load benchmarks.

Each pass holds the only slot for `base_ms + per_question_ms * questions answered`, where a
batch of N states under Q questions answers N*Q. Answers always pick the first option.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def build(base_ms: float, per_question_ms: float) -> Starlette:
    slot = asyncio.Lock()

    def answers(questions: dict) -> dict:
        out = {}
        for qid, question in questions.items():
            if question.get("type") == "noul":
                out[qid] = {"type": "noul", "noul": 0.9}
            else:
                labels = list(question["criteria"])
                share = 0.1 / max(1, len(labels) - 1)
                out[qid] = {"type": "choice", "choice": labels[0],
                            "probabilities": {l: (0.9 if i == 0 else share) for i, l in enumerate(labels)}}
        return out

    async def work(count: int) -> None:
        async with slot:
            await asyncio.sleep((base_ms + per_question_ms * count) / 1000)

    async def single(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        await work(len(body["questions"]))
        return JSONResponse({"model": "sim", "answers": answers(body["questions"]), "usage": {"input_tokens": 0, "output_tokens": 0}})

    async def batch(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        await work(len(body["questions"]) * len(body["states"]))
        result = {"model": "sim", "answers": answers(body["questions"]), "usage": {"input_tokens": 0, "output_tokens": 0}}
        return JSONResponse({"results": [result] * len(body["states"]), "total_usage": {"input_tokens": 0, "output_tokens": 0}})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "engine": "sim", "model": "sim", "device": "cpu"})

    return Starlette(routes=[
        Route("/v1/systemone", single, methods=["POST"]),
        Route("/v1/systemone/batch", batch, methods=["POST"]),
        Route("/health", health),
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--base-ms", type=float, default=20.0)
    parser.add_argument("--per-question-ms", type=float, default=0.25)
    args = parser.parse_args()
    uvicorn.run(build(args.base_ms, args.per_question_ms), host="127.0.0.1", port=args.port, log_level="warning")
