"""`calibrate`: ask labelled decisions live, fit, report, and save only when asked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from . import EXIT_DECISION, EXIT_HEALTH, EXIT_OK, EXIT_START, talk_to_service, write_learned

if TYPE_CHECKING:
    from ..client.service_client import ServiceClient


def labelled_rows(args: argparse.Namespace, command: str) -> list | None:
    """The rows of `args.data`, or None after saying why not (a bad row, or `--ship` outside a
    clone of the repository)."""
    from ..offline import calibrate as tool

    try:
        rows = [row for path in args.data for row in tool.load(Path(path))]
    except tool.DataError as exc:
        print(f"system1 {command}: {exc}", file=sys.stderr)
        return None
    return None if ship_refused(args, command) else rows


def ship_refused(args: argparse.Namespace, command: str) -> bool:
    """Whether `--ship` was given outside a clone of the repository (after saying so)."""
    from ..offline import calibrate as tool

    if args.ship and tool.REPORTS is None:
        print(f"system1 {command}: --ship writes into a clone of the repository; use --write here", file=sys.stderr)
        return True
    return False


async def routing_log_rows(service: ServiceClient, args: argparse.Namespace) -> list:
    """With `--from-routing-log`, the teacher labels of the service's routing log as rows."""
    from ..offline import calibrate as tool
    from ..hook.log import teacher_rows

    if not args.from_routing_log:
        return []
    return tool.parse_rows(teacher_rows((await service.routing_entries())["entries"]), "the routing log")


def sources(args: argparse.Namespace, *more: str) -> list[str]:
    """What the rows came from, for the report."""
    return (["standard input" if p == "-" else str(p) for p in args.data] + list(more)
            + (["the routing log"] if args.from_routing_log else []))


def run(args: argparse.Namespace) -> int:
    from ..offline import calibrate as tool

    if args.answers:
        if args.data or args.from_routing_log:
            print("system1 calibrate: --answers fits saved answers; give no data files or --from-routing-log with it",
                  file=sys.stderr)
            return EXIT_START
        if ship_refused(args, "calibrate"):
            return EXIT_START
        try:
            where, saved = tool.load_answers(Path(args.answers))
        except tool.DataError as exc:
            print(f"system1 calibrate: {exc}", file=sys.stderr)
            return EXIT_START
        if not args.write:
            return _fit_and_save(args, saved, [], where) or EXIT_OK  # None only after --write

        async def refit(service: ServiceClient) -> int:
            return await _reload_if_written(service, _fit_and_save(args, saved, [], where))

        return talk_to_service(args, refit)

    if not args.data and not args.from_routing_log:
        print("system1 calibrate: give labelled JSONL files, --from-routing-log, or --answers", file=sys.stderr)
        return EXIT_START
    rows = labelled_rows(args, "calibrate")
    if rows is None:
        return EXIT_START

    async def work(service: ServiceClient) -> int:
        rows.extend(await routing_log_rows(service, args))
        answered, problems = await tool.ask_all(service, rows, progress=sys.stderr.isatty() and not args.json)
        if args.save_answers:
            tool.save_answers(Path(args.save_answers), answered, sources(args))
            print(f"answers written to {args.save_answers}", file=sys.stderr)
        return await _reload_if_written(service, _fit_and_save(args, answered, problems, sources(args)))

    return talk_to_service(args, work)


def _fit_and_save(args: argparse.Namespace, answered: list, problems: list[str], where: list[str]) -> int | None:
    """Fit `answered`, print the report and save what `args` asks for: an exit code, or None
    when `--write` saved this installation's fits and the service is to reload them."""
    from ..core.calibration import LOCAL_FITS_NAME, SHIPPED_FITS
    from ..core.config import load_config
    from ..offline import calibrate as tool

    if len(answered) < 2:
        print(f"system1 calibrate: too few answered rows to fit ({len(answered)}); {'; '.join(problems[:3])}",
              file=sys.stderr)
        return EXIT_DECISION
    report, curves = tool.results(answered, args.target_accuracy, args.folds)
    text = tool.render(report, where, problems)
    print(json.dumps(report, indent=2) if args.json else text)
    report_path = Path(args.report) if args.report else None
    if args.ship:
        assert tool.REPORTS is not None  # refused earlier without a clone
        report_path = tool.REPORTS / f"{report['provider']}-{report['model']}.md"
        tool.merge(SHIPPED_FITS, report["fits"])
        print(f"shipped fits written to {SHIPPED_FITS}", file=sys.stderr)
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(text, encoding="utf-8")
        drawn = tool.diagram(answered, curves, report_path.with_suffix(".png"))
        print(f"report written to {report_path}" + ("" if drawn else " (install matplotlib for the diagram)"),
              file=sys.stderr)
    if not args.write:
        return EXIT_OK
    local = load_config().learned_dir / LOCAL_FITS_NAME
    if not write_learned("calibrate", local, lambda path: tool.merge(path, report["fits"])):
        return EXIT_START
    print(f"fits written to {local}; reloading the service", file=sys.stderr)
    return None


async def _reload_if_written(service: ServiceClient, code: int | None) -> int:
    """`code`, or when `_fit_and_save` wrote this installation's fits (None), whether the
    service re-read them."""
    if code is not None:
        return code
    reloaded = await service.reload()
    return EXIT_OK if reloaded.get("reloaded") else EXIT_HEALTH
