"""`system1 router refit` and `system1 router shadow`: what the router's logs say.

Both read the logs in this machine's state directory (the config's paths), so in the stack they
run inside the gateway's container: `docker exec system1-gateway system1 router refit`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import EXIT_OK, EXIT_START, talk_to_service, write_learned


def refit(args: argparse.Namespace) -> int:
    from ..core.config import load_config
    from ..offline.refit import evidence, fit, overlay, read_logs, render
    from ..router.outcomes import outcome_log_path
    from ..router.skills import load_overlay, skills_path, write_skills
    from .service import _reload as reload_service

    config = load_config()
    if config.errors:
        print("system1 router refit: the config has errors:", *config.errors, sep="\n  ", file=sys.stderr)
        return EXIT_START
    catalogue, install = config.settings.router, config.install_dir
    decisions = read_logs(Path(args.log) if args.log else catalogue.decision_log(install))
    outcomes = read_logs(Path(args.outcomes) if args.outcomes else outcome_log_path(catalogue, install))
    tallies, skipped = evidence(decisions.entries, outcomes.entries, catalogue.outcomes.retry_window_s)
    current, _ = load_overlay(catalogue, config.learned_dir)  # a broken overlay: refit from the guesses
    fitted = fit(catalogue, current, tallies, args.prior_strength)
    by_level = fit(catalogue, current, tallies, args.prior_strength, by_level=True)
    document = overlay(fitted, args.prior_strength, by_level)
    if args.json:
        print(json.dumps({**document, "refitted": [as_json(f) for f in fitted],
                          "refitted_by_level": [as_json(f) for f in by_level]}, indent=2))
    else:
        print(render(fitted, skipped, len(decisions.entries), args.prior_strength, by_level))
    unreadable = decisions.unreadable + outcomes.unreadable
    if unreadable:
        print(f"{unreadable} log lines were not JSON objects and were skipped.", file=sys.stderr)
    if not args.write:
        if fitted:
            print("\nNothing written: --write saves these skills for the router.", file=sys.stderr)
        return EXIT_OK
    path = skills_path(catalogue, config.learned_dir)
    if not write_learned("router refit", path, lambda target: write_skills(target, document)):
        return EXIT_START
    print(f"\nwrote {path}", file=sys.stderr)
    # The confirmation goes to stderr with the other notes: stdout holds only the report (or JSON).
    if talk_to_service(args, lambda service: reload_service(service, sys.stderr)) != EXIT_OK:
        print("The router takes these skills when the service next starts or reloads (`system1 reload`).",
              file=sys.stderr)
    return EXIT_OK


def as_json(fitted: Any) -> dict[str, Any]:
    """One refitted skill (`offline.refit.Fitted`) as `--json` prints it."""
    return {"model": fitted.model, "topic": fitted.topic, **({} if fitted.level is None else {"complexity": fitted.level}),
            "guess": fitted.guess, "current": fitted.current, "new": fitted.new, "good": round(fitted.tally.successes, 3),
            "bad": round(fitted.tally.failures, 3), "sources": {k: round(v, 3) for k, v in fitted.tally.sources.items()}}


def shadow(args: argparse.Namespace) -> int:
    from ..core.config import load_config
    from ..offline.refit import read_logs
    from ..router.shadow import shadow_report

    config = load_config()
    settings = config.settings.router
    path = Path(args.log) if args.log else settings.decision.shadow_log_path(config.install_dir)
    print(shadow_report(read_logs(path).entries))
    return EXIT_OK
