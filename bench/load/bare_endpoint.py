"""The reference the gateway's own cost is measured against: a bare FastAPI endpoint that
validates the same request model and answers the same response shape as the gateway's mock
engine, with nothing in between, served on the same server stack as `system1 serve`.

    python bench/load/bare_endpoint.py --port 8099
"""

from __future__ import annotations

import argparse

import uvicorn
from fastapi import FastAPI

from system1.core.schema import Attempt, DecideRequest, DecideResponse, new_request_id
from system1.service.server import server_stack

app = FastAPI()


@app.post("/v1/decide")
async def decide(request: DecideRequest) -> DecideResponse:
    options = request.choices
    probabilities = {option: (0.9 if i == 0 else 0.1 / max(1, len(options) - 1)) for i, option in enumerate(options)}
    return DecideResponse(
        request_id=new_request_id(), status="decided", decision=options[0], confidence=0.9,
        rationale=f"mock: {options[0]}=0.90", provider="mock", probabilities=probabilities, calibrated=False,
        latency_ms=0, attempts=[Attempt(provider="mock", outcome="ok", latency_ms=0)],
    )


@app.get("/readyz")
async def ready() -> dict[str, bool]:
    return {"ready": True}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    loop, http = server_stack()
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port, loop=loop, http=http,
                log_config=None, access_log=False, proxy_headers=False)  # as `system1 serve`
