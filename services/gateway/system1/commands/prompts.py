"""`prompts`: the logged prompts waiting for teacher labels, and `--label` to write them.

Both go through the gateway service's API, so the labels land in the routing log the service
keeps (in the stack, in its state volume) wherever this runs; `evaluate`, and `calibrate` and
`learn` with `--from-routing-log`, read them from there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import EXIT_OK, EXIT_START, talk_to_service


def run(args: argparse.Namespace) -> int:
    from ..hook.log import labels_of
    from ..client.service_client import ServiceClient

    sent = None
    if args.label:
        source = "standard input" if args.label == "-" else args.label
        try:
            text = sys.stdin.read() if args.label == "-" else Path(args.label).read_text(encoding="utf-8")
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
            labels_of({"labels": items})  # refused here, by item and field, before anything is sent
        except (OSError, ValueError) as exc:
            print(f"system1 prompts: {source}: {exc}", file=sys.stderr)
            return EXIT_START
        sent = {"labels": items}

    async def work(service: ServiceClient) -> int:
        if sent is not None:
            print(f"labelled {(await service.label_prompts(sent))['labelled']} logged prompts")
        else:
            for prompt in await service.waiting_prompts(args.limit):
                print(json.dumps(prompt, ensure_ascii=False))
        return EXIT_OK

    return talk_to_service(args, work)
