"""`hook route`: what the routing hook would do for a prompt."""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import EXIT_OK, client_name, talk_to_service


def run(args: argparse.Namespace) -> int:
    """Show what the routing hook would do for a prompt (the hook itself hides its errors)."""
    from ..client.service_client import ServiceClient

    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    event = {"hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": args.cwd or os.getcwd(),
             "home": os.path.expanduser("~")}

    async def work(service: ServiceClient) -> int:
        print(json.dumps(await service.route(event, client_name()), indent=2))
        return EXIT_OK

    return talk_to_service(args, work)
