"""`evaluate`: is the engine ready to route?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import EXIT_HEALTH, EXIT_OK, EXIT_START, talk_to_service


def run(args: argparse.Namespace) -> int:
    from ..core.config import load_config
    from ..offline import evaluate as tool
    from ..hook.log import evaluable_entries
    from ..client.service_client import ServiceClient

    config = load_config()
    routing, gateway = config.settings.routing, config.settings.gateway
    threshold = args.threshold if args.threshold is not None else (
        routing.min_confidence if routing.min_confidence is not None else gateway.min_confidence)

    async def work(service: ServiceClient) -> int:
        # The service's own log (in the stack, the one in its state volume), or the file named.
        if args.log:
            try:
                entries, unreadable = evaluable_entries(Path(args.log).expanduser())
            except OSError as exc:
                print(f"system1 evaluate: {exc}", file=sys.stderr)
                return EXIT_START
        else:
            read = await service.routing_entries()
            entries, unreadable = read["entries"], read["unreadable_lines"]
        if unreadable:
            print(f"system1 evaluate: skipped {unreadable} routing log lines that are not JSON", file=sys.stderr)
        answers: list[dict[str, tool.FeatureAnswer]] = []
        for entry in entries:  # the four features of an entry in one engine pass
            reply = await service.features(entry["prompt"], args.provider, client="evaluate", batch=True)
            answers.append({name: tool.FeatureAnswer(f["answer"] or max(p, key=p.get), f["confidence"], p.get("yes", 0.0))
                            for name, f in (reply.get("features") or {}).items() if (p := f.get("probabilities"))})
        report = {**tool.assess(entries, answers, threshold), "provider": args.provider}
        state, reasons = tool.verdict(report, tool.Bars(args.min_feature_accuracy, args.min_safety, args.min_failures))
        if args.json:
            print(json.dumps({**report, "verdict": state, "reasons": reasons}, indent=2))
        else:
            print(tool.render(report, state, reasons))
        return EXIT_OK if state == "READY" else EXIT_HEALTH

    return talk_to_service(args, work)
