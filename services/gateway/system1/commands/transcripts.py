"""`outcomes` and `report`: what Claude Code transcripts say about spawns and hints."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from . import EXIT_OK, EXIT_START, talk_to_service

if TYPE_CHECKING:
    from ..client.service_client import ServiceClient


def _sessions(args: argparse.Namespace):
    from pathlib import Path

    from ..offline.transcripts import read_sessions

    projects = Path(args.projects_dir).expanduser() if args.projects_dir else Path("~/.claude/projects").expanduser()
    if not projects.is_dir():
        print(f"no transcripts at {projects} (use --projects-dir)", file=sys.stderr)
        return None
    return read_sessions(projects, args.days)


def outcomes(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..hook.log import write_outcomes
    from ..offline import spawn_outcomes

    sessions = _sessions(args)
    if sessions is None:
        return EXIT_START
    verdicts = [v for session in sessions.values() for v in spawn_outcomes.judge(session.spawns)]
    result = spawn_outcomes.summary(verdicts)
    if args.apply and args.log:
        result["applied"] = write_outcomes(Path(args.log).expanduser(), verdicts)
    elif args.apply:  # the service's own log: in the stack, the one in its state volume
        code = talk_to_service(args, lambda service: _send(service, verdicts, result))
        if code != EXIT_OK:
            return code
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['spawns']} spawns: {result['failed']} failed, {result['succeeded']} succeeded")
        print("by tier: " + ", ".join(f"{t} {n}" for t, n in sorted(result["spawns_by_tier"].items())))
        for reason, n in sorted(result["failure_reasons"].items()):
            print(f"  failed, {reason}: {n}")
        for item in result["doubtful"]:
            print(f"  doubtful: {item['tool_use_id']} {item['outcome']} ({item['reason']})")
        if args.apply:
            print(f"labelled {result['applied']} routing log entries")
    return EXIT_OK


async def _send(service: ServiceClient, verdicts: list, result: dict) -> int:
    from ..hook.log import as_json

    result["applied"] = (await service.apply_outcomes(as_json(verdicts)))["applied"]
    return EXIT_OK


def report(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..offline import usage

    try:
        prices = usage.load_prices(Path(args.prices) if args.prices else usage.DEFAULT_PRICES)
    except (OSError, ValueError) as exc:
        print(f"system1 report: {exc}", file=sys.stderr)
        return EXIT_START
    sessions = _sessions(args)
    if sessions is None:
        return EXIT_START
    result = usage.report(sessions, prices)
    print(json.dumps(result, indent=2) if args.json else usage.render(result, args.days))
    return EXIT_OK
