"""The `system1` command: the parser, dispatching to `commands/` (imported only when used, so
the stdio bridge starts without the service's dependencies)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .commands import EXIT_DECISION, EXIT_HEALTH, EXIT_OK, EXIT_START

if TYPE_CHECKING:
    import httpx

__all__ = ["EXIT_DECISION", "EXIT_HEALTH", "EXIT_OK", "EXIT_START", "main", "parser"]


def bounded(kind: type, low: float, high: float | None = None) -> Callable[[str], Any]:
    """An argparse type for a number in [low, high] that says the bounds when it is not."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole number' if kind is int else 'number'}") from None
        if value < low or (high is not None and value > high):
            where = f"at least {low:g}" if high is None else f"between {low:g} and {high:g}"
            raise argparse.ArgumentTypeError(f"{text} is not {where}")
        return value

    return parse


SHARE, PORT, FOLDS, COUNT = bounded(float, 0, 1), bounded(int, 1, 65535), bounded(int, 2, 100), bounded(int, 1)
SECONDS = bounded(float, 0.1, 3600)


def command(module: str, name: str = "run") -> Callable[[argparse.Namespace], int]:
    def call(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"system1.commands.{module}"), name)(args)

    return call


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="system1", description="System-1 Gateway")
    commands = top.add_subparsers(dest="command", required=True)
    # Every command that talks to a running service takes --url.
    service = argparse.ArgumentParser(add_help=False)
    service.add_argument("--url", help="the gateway service (default: $SYSTEM1_GATEWAY_URL, else http://127.0.0.1:8080)")

    serve = commands.add_parser("serve", help="run the gateway service (REST, /mcp, metrics)")
    serve.add_argument("--host", help="bind address (default: [service] host)")
    serve.add_argument("--port", type=PORT, help="port (default: [service] port)")
    serve.set_defaults(func=command("service", "serve"))

    reload = commands.add_parser("reload", parents=[service], help="make the running service re-read its config and fits")
    reload.set_defaults(func=command("service", "reload"))

    keys = commands.add_parser("keys", parents=[service], help="add an API key for a client (and reload the service)")
    keys.add_argument("action", choices=["add"])
    keys.add_argument("name", help="the client the key names")
    keys.add_argument("--file", help="keys file (default: [service] api_keys_file)")
    keys.set_defaults(func=command("service", "keys"))

    # What `calibrate` and `learn` share: held-out folds, the report, and where results go.
    fitting = argparse.ArgumentParser(add_help=False)
    fitting.add_argument("--folds", type=FOLDS, default=5, help="cross-validation folds for the held-out figures")
    fitting.add_argument("--report", help="also write the report (Markdown) here, with its plot beside it")
    fitting.add_argument("--json", action="store_true", help="print machine-readable results")
    fitting.add_argument("--from-routing-log", action="store_true",
                         help="also the teacher labels of the gateway service's routing log (the four features)")
    where = fitting.add_mutually_exclusive_group()
    where.add_argument("--write", action="store_true", help="save the results for this installation and reload the service")
    where.add_argument("--ship", action="store_true", help="save the results into the repository's shipped ones, with the report")

    calibrate = commands.add_parser("calibrate", parents=[service, fitting],
                                    help="fit temperatures on labelled decisions, asked live")
    calibrate.add_argument("data", nargs="*", help="JSONL files of {question, options, context, label}")
    calibrate.add_argument("--target-accuracy", type=SHARE, default=0.8, help="for the recommended threshold")
    answers = calibrate.add_mutually_exclusive_group()
    answers.add_argument("--save-answers", metavar="FILE", help="also write the engine's answers here, for a later --answers")
    answers.add_argument("--answers", metavar="FILE",
                         help="fit the answers --save-answers wrote instead of asking (no data files; the service only for --write)")
    calibrate.set_defaults(func=command("calibrate"))

    learn = commands.add_parser("learn", parents=[service, fitting],
                                help="fit a head per decision kind on labelled rows; keep those that beat the engine")
    learn.add_argument("data", nargs="*", help="JSONL files of {question, options, context, label, kind}")
    learn.add_argument("--from-store", action="store_true", help="also the decisions labelled through feedback")
    learn.add_argument("--router-topics", action="store_true",
                       help="also the examples of [router.topics], every topic-question row asked over those topics")
    learn.add_argument("--kind", action="append", default=[], metavar="KIND",
                       help="fit only the rows of this kind (repeatable; default: every kind)")
    learn.add_argument("--threshold", type=SHARE, help="for coverage and accuracy (default: [gateway] min_confidence)")
    learn.add_argument("--repeats", type=bounded(int, 1, 50), default=5,
                       help="splits into folds, each drawn afresh, that the held-out figures are averaged over (default 5)")
    learn.add_argument("--teacher", metavar="PROVIDER",
                       help="label the --pool rows with this configured provider's sure answers and train on them too")
    learn.add_argument("--pool", action="append", default=[], metavar="FILE",
                       help="unlabelled JSONL rows (or a router shadow log) for the teacher; repeatable")
    learn.add_argument("--pool-from-store", action="store_true",
                       help="also the remembered decisions no one labelled, for the teacher")
    learn.set_defaults(func=command("learn"))

    prompts = commands.add_parser("prompts", parents=[service],
                                  help="logged prompts waiting for teacher labels, or --label them")
    prompts.add_argument("--limit", type=COUNT, default=50, help="the newest this many (default 50)")
    prompts.add_argument("--label", metavar="FILE", help="JSONL of {id, labels: {feature: yes|no}} ('-': standard input)")
    prompts.set_defaults(func=command("prompts"))

    feedback = commands.add_parser("feedback", parents=[service], help="label a decision the gateway remembered")
    feedback.add_argument("request_id", help="the decision's request_id")
    feedback.add_argument("label", help="the right answer: one of its options (yes or no without options)")
    feedback.set_defaults(func=command("learn", "feedback"))

    evaluate = commands.add_parser("evaluate", parents=[service], help="read-only: is the engine ready to route? READY or NOT READY")
    evaluate.add_argument("--log", help="read this routing log file (default: the gateway service's own log)")
    evaluate.add_argument("--provider", help="ask this configured provider instead of the chain (evaluate before switching)")
    evaluate.add_argument("--threshold", type=SHARE, help="routing threshold (default: [routing] min_confidence)")
    evaluate.add_argument("--min-feature-accuracy", type=SHARE, default=0.85)
    evaluate.add_argument("--min-safety", type=SHARE, default=0.95)
    evaluate.add_argument("--min-failures", type=COUNT, default=30)
    evaluate.add_argument("--json", action="store_true", help="print machine-readable results")
    evaluate.set_defaults(func=command("evaluate"))

    outcomes = commands.add_parser("outcomes", parents=[service],
                                   help="label every Agent spawn failed or succeeded from transcripts")
    outcomes.add_argument("--days", type=COUNT, default=30)
    outcomes.add_argument("--projects-dir", help="Claude Code transcripts (default ~/.claude/projects)")
    outcomes.add_argument("--apply", action="store_true",
                          help="write the outcomes into the gateway service's routing log (or --log's)")
    outcomes.add_argument("--log", help="with --apply: write into this routing log file instead of the service's")
    outcomes.add_argument("--json", action="store_true")
    outcomes.set_defaults(func=command("transcripts", "outcomes"))

    router = commands.add_parser("router", help="the model router's learning loop: refit skills, read the shadow")
    router_commands = router.add_subparsers(dest="router_command", required=True)
    refit = router_commands.add_parser("refit", parents=[service],
                                       help="fit each model's per-topic skill from logged outcomes; --write saves them")
    refit.add_argument("--log", help="the decision log (default: [router] log_file, else <state>/logs/router.jsonl)")
    refit.add_argument("--outcomes", help="the outcome log (default: [router.outcomes] log_file)")
    refit.add_argument("--prior-strength", type=bounded(float, 0), default=10.0,
                       help="how many outcomes the catalogue's guess is worth (default 10)")
    refit.add_argument("--write", action="store_true",
                       help="write the skills overlay and have the running service reload it")
    refit.add_argument("--json", action="store_true")
    refit.set_defaults(func=command("router", "refit"))
    shadow = router_commands.add_parser("shadow", help="agreement of the shadow engine, from the shadow log")
    shadow.add_argument("--log", help="the shadow log (default: [router.decision] shadow_log)")
    shadow.set_defaults(func=command("router", "shadow"))

    report = commands.add_parser("report", help="hint reach, adherence, subagent cost by tier, savings (totals only)")
    report.add_argument("--days", type=COUNT, default=14)
    report.add_argument("--projects-dir", help="Claude Code transcripts (default ~/.claude/projects)")
    report.add_argument("--prices", help="prices file (default: the shipped list prices)")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=command("transcripts", "report"))

    hook = commands.add_parser("hook", parents=[service], help="debug the routing hook")
    hook.add_argument("action", choices=["route"])
    hook.add_argument("--prompt", help="the prompt (default: standard input)")
    hook.add_argument("--cwd", help="the working directory the hook would report (default: this one)")
    hook.set_defaults(func=command("hook"))

    mcp = commands.add_parser("mcp", help="serve the MCP tools over stdio (a bridge to the service)")
    mcp.add_argument("--standalone", action="store_true", help="run the gateway core in this process")
    mcp.set_defaults(func=command("service", "mcp"))

    smoke = commands.add_parser("smoke", parents=[service], help="start the MCP server as a client does and check it")
    smoke.add_argument("--command", help="server command line (default: this Python's `system1 mcp`)")
    smoke.add_argument("--standalone", action="store_true", help="start the default command with --standalone")
    smoke.add_argument("--question", help="also ask one decision")
    smoke.add_argument("--options", nargs="+", help="options for --question (yes/no without)")
    smoke.add_argument("--timeout", type=SECONDS, default=60.0, help="seconds for the whole check")
    smoke.set_defaults(func=command("smoke"))

    toggle = commands.add_parser("toggle", help="pause or resume System-1, or show its state")
    toggle.add_argument("state", choices=["on", "off", "status"])
    toggle.set_defaults(func=command("service", "toggle"))
    return top


def main(argv: Sequence[str] | None = None, transport: httpx.AsyncBaseTransport | None = None) -> int:
    """Run one command; `transport` carries the commands' calls to the service (tests pass the
    app in process)."""
    args = parser().parse_args(argv)
    args.transport = transport
    if getattr(args, "options", None) and not getattr(args, "question", None):
        parser().error("--options needs --question")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
