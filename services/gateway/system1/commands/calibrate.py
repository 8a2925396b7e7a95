"""`calibrate`: ask labelled decisions live, fit, report, and save only when asked."""

from __future__ import annotations

import argparse
import os
import sys

from ..config import install_dir
from . import EXIT_DECISION, EXIT_OK, EXIT_START


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    from .. import calibrate_tool as tool
    from ..bridge import ServiceBackend

    try:
        rows = [row for path in args.data for row in tool.load(Path(path))]
    except tool.DataError as exc:
        print(f"system1 calibrate: {exc}", file=sys.stderr)
        return EXIT_START
    if args.ship and not tool.REPORTS.parent.is_dir():
        print("system1 calibrate: --ship writes into a clone of the repository; use --write here", file=sys.stderr)
        return EXIT_START
    backend = ServiceBackend.from_env()

    async def ask():
        try:
            return await tool.ask_all(backend.http, rows, progress=sys.stderr.isatty() and not args.json)
        finally:
            await backend.aclose()

    import httpx

    try:
        answered, problems = asyncio.run(ask())
    except httpx.HTTPError as exc:
        print(f"system1 calibrate: {backend._unreachable(exc)}", file=sys.stderr)
        return EXIT_START
    if len(answered) < 2:
        print(f"system1 calibrate: too few answered rows to fit ({len(answered)}); {'; '.join(problems[:3])}", file=sys.stderr)
        return EXIT_DECISION
    report = tool.results(answered, args.target_accuracy, args.folds)
    text = tool.render(report, ["standard input" if p == "-" else str(p) for p in args.data], problems)
    print(json.dumps(report, indent=2) if args.json else text)
    report_path = Path(args.report) if args.report else None
    if args.ship:
        report_path = tool.REPORTS / f"{report['provider']}-{report['model']}.md"
        tool.merge(tool.SHIPPED_FITS, report["fits"])
        print(f"shipped fits written to {tool.SHIPPED_FITS}", file=sys.stderr)
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(text, encoding="utf-8")
        probabilities = {"before": [r.probabilities for r in answered],
                         "after (held-out)": tool.cross_validated(answered, args.folds)}
        drawn = tool.diagram(answered, probabilities, report_path.with_suffix(".png"))
        print(f"report written to {report_path}" + ("" if drawn else " (install matplotlib for the diagram)"), file=sys.stderr)
    if args.write:
        local = install_dir(os.environ) / tool.LOCAL_FITS_NAME
        tool.merge(local, report["fits"])
        print(f"fits written to {local}; reloading the service", file=sys.stderr)
        from .service import reload

        return reload(args)
    return EXIT_OK
