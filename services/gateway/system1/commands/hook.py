"""`hook route`: what the routing hook would do for a prompt."""

from __future__ import annotations

import argparse
import os
import sys

from . import EXIT_OK, EXIT_START, client_name


def run(args: argparse.Namespace) -> int:
    """Show what the routing hook would do for a prompt (the hook itself hides its errors)."""
    import asyncio
    import json

    import httpx

    from ..bridge import ServiceBackend

    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    event = {"hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": args.cwd or os.getcwd(),
             "home": os.path.expanduser("~")}
    backend = ServiceBackend.from_env()

    async def ask():
        try:
            response = await backend.http.post("/v1/route", json=event, headers={"X-System1-Client": client_name()})
            return response.json()
        finally:
            await backend.aclose()

    try:
        print(json.dumps(asyncio.run(ask()), indent=2))
    except (httpx.HTTPError, ValueError) as exc:
        print(backend._unreachable(exc), file=sys.stderr)
        return EXIT_START
    return EXIT_OK
