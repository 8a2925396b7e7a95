"""The `system1` command: `serve`, `mcp`, `smoke`, `toggle`, `reload`, `keys`, `calibrate`
and `evaluate`."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from .config import install_dir, load_config

EXIT_OK, EXIT_START, EXIT_HEALTH, EXIT_DECISION = 0, 1, 2, 3


def client_name() -> str:
    return os.environ.get("SYSTEM1_CLIENT") or "local"


# -- mcp ---------------------------------------------------------------------------------------
def cmd_mcp(args: argparse.Namespace) -> int:
    from .logs import configure_logging
    from .mcp import run_stdio

    if not args.standalone:
        from .bridge import ServiceBackend

        configure_logging(os.environ.get("SYSTEM1_LOG_LEVEL", "INFO").upper())

        async def service_backend():
            return ServiceBackend.from_env()

        run_stdio(service_backend, client_name())
        return EXIT_OK

    config = load_config()
    gateway_settings = config.settings.gateway
    configure_logging(gateway_settings.log_level, gateway_settings.log_file)

    async def core_backend():
        from .gateway import Gateway
        from .mcp import CoreBackend

        return CoreBackend(Gateway(config))

    run_stdio(core_backend, client_name())
    return EXIT_OK


# -- serve, reload, keys -----------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    import signal

    import uvicorn

    from .api import create_app
    from .logs import configure_logging
    from .service import Service

    service = Service()
    settings = service.config.settings
    configure_logging(settings.gateway.log_level, settings.gateway.log_file)
    app = create_app(service)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host or settings.service.host,
            port=args.port or settings.service.port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=10,
        )
    )

    async def main() -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(service.reload()))
        await server.serve()

    import asyncio

    asyncio.run(main())
    return EXIT_OK


def cmd_reload(args: argparse.Namespace) -> int:
    from .bridge import ServiceBackend

    backend = ServiceBackend.from_env()

    async def main() -> int:
        import httpx

        try:
            response = await backend.http.post("/v1/reload", timeout=30)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            print(backend._unreachable(exc), file=sys.stderr)
            return EXIT_START
        finally:
            await backend.aclose()
        if body.get("reloaded"):
            print("reloaded the config and calibration fits")
            return EXIT_OK
        print("reload refused, the running config stays:", *body.get("errors", [body]), sep="\n  ", file=sys.stderr)
        return EXIT_HEALTH

    import asyncio

    return asyncio.run(main())


def cmd_keys(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .auth import add_key

    path = args.file or load_config().settings.service.api_keys_file
    if not path:
        print("no keys file: set [service] api_keys_file or pass --file", file=sys.stderr)
        return EXIT_START
    try:
        key = add_key(Path(path).expanduser(), args.name)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return EXIT_START
    print(f"API key for {args.name} (shown once; the file keeps only its hash):\n{key}")
    print("Reload the service (`system1 reload`) for it to take effect.", file=sys.stderr)
    return EXIT_OK


# -- calibrate ---------------------------------------------------------------------------------
def cmd_calibrate(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    from . import calibrate_tool as tool
    from .bridge import ServiceBackend

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
    text = tool.render(report, [str(p) for p in args.data], problems)
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
        return cmd_reload(args)
    return EXIT_OK


# -- evaluate ----------------------------------------------------------------------------------
def cmd_evaluate(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    import httpx

    from . import evaluate_tool as tool
    from .bridge import ServiceBackend
    from .routing.features import FEATURES

    config = load_config()
    log = Path(args.log).expanduser() if args.log else config.routing_log
    try:
        entries = tool.read_log(log)
    except (OSError, ValueError) as exc:
        print(f"system1 evaluate: {exc}", file=sys.stderr)
        return EXIT_START
    routing, gateway = config.settings.routing, config.settings.gateway
    threshold = args.threshold if args.threshold is not None else (
        routing.min_confidence if routing.min_confidence is not None else gateway.min_confidence)
    backend = ServiceBackend.from_env()
    headers = {"X-System1-Priority": "batch", "X-System1-Client": "evaluate"}

    async def ask() -> list[dict[str, tool.FeatureAnswer]]:
        answers = []
        try:
            for entry in entries:
                found = {}
                for name, question in FEATURES.items():
                    body = {"question": question, "context": {"prompt": entry["prompt"]}, "min_confidence": 0}
                    reply = (await backend.http.post("/v1/decide", json=body, headers=headers)).json()
                    if reply.get("probabilities") and reply.get("confidence") is not None:
                        p = reply["probabilities"]
                        answer = reply.get("decision") or max(p, key=p.get)
                        found[name] = tool.FeatureAnswer(answer, reply["confidence"], p.get("yes", 0.0))
                answers.append(found)
        finally:
            await backend.aclose()
        return answers

    try:
        answers = asyncio.run(ask())
    except httpx.HTTPError as exc:
        print(f"system1 evaluate: {backend._unreachable(exc)}", file=sys.stderr)
        return EXIT_START
    report = tool.assess(entries, answers, threshold)
    state, reasons = tool.verdict(report, tool.Bars(args.min_feature_accuracy, args.min_safety, args.min_failures))
    if args.json:
        print(json.dumps({**report, "verdict": state, "reasons": reasons}, indent=2))
    else:
        print(tool.render(report, state, reasons))
    return EXIT_OK if state == "READY" else EXIT_HEALTH


# -- outcomes and report ---------------------------------------------------------------------
def _sessions(args: argparse.Namespace):
    from pathlib import Path

    from .transcripts import read_sessions

    projects = Path(args.projects_dir).expanduser() if args.projects_dir else Path("~/.claude/projects").expanduser()
    if not projects.is_dir():
        print(f"no transcripts at {projects} (use --projects-dir)", file=sys.stderr)
        return None
    return read_sessions(projects, args.days)


def cmd_outcomes(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from . import outcomes

    sessions = _sessions(args)
    if sessions is None:
        return EXIT_START
    verdicts = [v for session in sessions.values() for v in outcomes.judge(session.spawns)]
    result = outcomes.summary(verdicts)
    if args.apply:
        log = Path(args.log).expanduser() if args.log else load_config().routing_log
        result["applied"] = outcomes.apply(log, verdicts)
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


def cmd_report(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from . import usage_report

    try:
        prices = usage_report.load_prices(Path(args.prices) if args.prices else usage_report.DEFAULT_PRICES)
    except (OSError, ValueError) as exc:
        print(f"system1 report: {exc}", file=sys.stderr)
        return EXIT_START
    sessions = _sessions(args)
    if sessions is None:
        return EXIT_START
    result = usage_report.report(sessions, prices)
    print(json.dumps(result, indent=2) if args.json else usage_report.render(result, args.days))
    return EXIT_OK


# -- hook --------------------------------------------------------------------------------------
def cmd_hook(args: argparse.Namespace) -> int:
    """Show what the routing hook would do for a prompt (the hook itself hides its errors)."""
    import asyncio
    import json

    import httpx

    from .bridge import ServiceBackend

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


# -- smoke -------------------------------------------------------------------------------------
def _line(label: str, verdict: str, detail: str = "") -> None:
    print(f"{label:<9} {verdict:<5} {detail}".rstrip(), flush=True)


def cmd_smoke(args: argparse.Namespace) -> int:
    import anyio

    command = shlex.split(args.command) if args.command else [sys.executable, "-m", "system1", "mcp"]
    if args.standalone and not args.command:
        command.append("--standalone")
    _line("START", "", shlex.join(command))
    try:
        return anyio.run(_smoke, command, args)
    except TimeoutError:
        _line("RESULT", "FAIL", f"no answer within {args.timeout:g} s")
        return EXIT_START


async def _smoke(command: list[str], args: argparse.Namespace) -> int:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with anyio.fail_after(args.timeout):
        try:
            client = Client(params, mode="legacy")
            await client.__aenter__()
        except Exception as exc:
            _line("HANDSHAKE", "FAIL", f"{type(exc).__name__}: {exc}")
            return EXIT_START
        try:
            info = client.server_info
            _line("HANDSHAKE", "OK", f"{info.name if info else '?'} {info.version if info else ''} "
                  f"(protocol {client.protocol_version})")
            names = sorted(t.name for t in (await client.list_tools()).tools)
            wanted = ["system1_capabilities", "system1_decide", "system1_health"]
            if names != wanted:
                _line("TOOLS", "FAIL", f"expected {wanted}, got {names}")
                return EXIT_START
            _line("TOOLS", "OK", ", ".join(names))
            health = (await client.call_tool("system1_health", {})).structured_content or {}
            status = health.get("status")
            probes = "; ".join(
                f"{p['name']} ({p['role']}): {'ok' if p['ok'] else 'DOWN'} - {p['detail']}"
                for p in health.get("providers", [])
            )
            errors = "; ".join(health.get("config_errors", []))
            verdict = {"ok": "OK", "degraded": "WARN"}.get(str(status), "FAIL")
            _line("HEALTH", verdict, f"{status}; {errors or probes or 'no providers'}")
            if verdict == "FAIL":
                return EXIT_HEALTH
            if args.question:
                request = {"question": args.question}
                if args.options:
                    request["options"] = args.options
                result = await client.call_tool("system1_decide", request)
                envelope = result.structured_content or {}
                status = envelope.get("status")
                if status == "error":
                    _line("DECISION", "FAIL", f"{envelope['error']['code']}: {envelope['error']['message']}")
                    return EXIT_DECISION
                shown = envelope.get("decision") if status == "decided" else "(abstained)"
                _line("DECISION", "OK", f"{status}: {shown!s} confidence {envelope.get('confidence')} "
                      f"via {envelope.get('provider')} in {envelope.get('latency_ms')} ms")
            _line("RESULT", "PASS")
            return EXIT_OK
        finally:
            await client.__aexit__(None, None, None)


# -- toggle ------------------------------------------------------------------------------------
def cmd_toggle(args: argparse.Namespace) -> int:
    from .gateway import PAUSE_FILE

    pause = install_dir(os.environ) / PAUSE_FILE
    if args.state == "off":
        pause.parent.mkdir(parents=True, exist_ok=True)
        pause.write_text(datetime.now(timezone.utc).isoformat(timespec="seconds") + "\n", encoding="utf-8")
        print(f"System-1 paused: decisions abstain until `system1 toggle on` ({pause})")
    elif args.state == "on":
        pause.unlink(missing_ok=True)
        print("System-1 on")
    elif pause.exists():
        print(f"System-1 paused since {pause.read_text(encoding='utf-8').strip()} ({pause})")
    else:
        print("System-1 on")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="system1", description="System-1 Gateway")
    commands = top.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway service (REST, /mcp, metrics)")
    serve.add_argument("--host", help="bind address (default: [service] host)")
    serve.add_argument("--port", type=int, help="port (default: [service] port)")
    serve.set_defaults(func=cmd_serve)

    reload = commands.add_parser("reload", help="make the running service re-read its config and fits")
    reload.set_defaults(func=cmd_reload)

    keys = commands.add_parser("keys", help="add an API key for a client")
    keys.add_argument("action", choices=["add"])
    keys.add_argument("name", help="the client the key names")
    keys.add_argument("--file", help="keys file (default: [service] api_keys_file)")
    keys.set_defaults(func=cmd_keys)

    calibrate = commands.add_parser("calibrate", help="fit temperatures on labelled decisions, asked live")
    calibrate.add_argument("data", nargs="+", help="JSONL files of {question, options, context, label}")
    calibrate.add_argument("--target-accuracy", type=float, default=0.8, help="for the recommended threshold")
    calibrate.add_argument("--folds", type=int, default=5, help="cross-validation folds for the held-out figures")
    calibrate.add_argument("--report", help="also write the report (Markdown) here, with a reliability diagram beside it")
    calibrate.add_argument("--json", action="store_true", help="print machine-readable results")
    where = calibrate.add_mutually_exclusive_group()
    where.add_argument("--write", action="store_true", help="save the fits for this installation and reload the service")
    where.add_argument("--ship", action="store_true", help="save the fits into the repository's shipped fits, with the report")
    calibrate.set_defaults(func=cmd_calibrate)

    evaluate = commands.add_parser("evaluate", help="read-only: is the engine ready to route? READY or NOT READY")
    evaluate.add_argument("--log", help="routing log (default: [routing] log_file)")
    evaluate.add_argument("--threshold", type=float, help="routing threshold (default: [routing] min_confidence)")
    evaluate.add_argument("--min-feature-accuracy", type=float, default=0.85)
    evaluate.add_argument("--min-safety", type=float, default=0.95)
    evaluate.add_argument("--min-failures", type=int, default=30)
    evaluate.add_argument("--json", action="store_true", help="print machine-readable results")
    evaluate.set_defaults(func=cmd_evaluate)

    outcomes = commands.add_parser("outcomes", help="label every Agent spawn failed or succeeded from transcripts")
    outcomes.add_argument("--days", type=int, default=30)
    outcomes.add_argument("--projects-dir", help="Claude Code transcripts (default ~/.claude/projects)")
    outcomes.add_argument("--apply", action="store_true", help="write the outcomes into the routing log")
    outcomes.add_argument("--log", help="routing log for --apply (default: [routing] log_file)")
    outcomes.add_argument("--json", action="store_true")
    outcomes.set_defaults(func=cmd_outcomes)

    report = commands.add_parser("report", help="hint reach, adherence, subagent cost by tier, savings (totals only)")
    report.add_argument("--days", type=int, default=14)
    report.add_argument("--projects-dir", help="Claude Code transcripts (default ~/.claude/projects)")
    report.add_argument("--prices", help="prices file (default: the shipped list prices)")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=cmd_report)

    hook = commands.add_parser("hook", help="debug the routing hook")
    hook.add_argument("action", choices=["route"])
    hook.add_argument("--prompt", help="the prompt (default: standard input)")
    hook.add_argument("--cwd", help="the working directory the hook would report (default: this one)")
    hook.set_defaults(func=cmd_hook)

    mcp = commands.add_parser("mcp", help="serve the MCP tools over stdio (a bridge to the service)")
    mcp.add_argument("--standalone", action="store_true", help="run the gateway core in this process")
    mcp.set_defaults(func=cmd_mcp)

    smoke = commands.add_parser("smoke", help="start the MCP server as a client does and check it")
    smoke.add_argument("--command", help="server command line (default: this Python's `system1 mcp`)")
    smoke.add_argument("--standalone", action="store_true", help="start the default command with --standalone")
    smoke.add_argument("--question", help="also ask one decision")
    smoke.add_argument("--options", nargs="+", help="options for --question (yes/no without)")
    smoke.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole check")
    smoke.set_defaults(func=cmd_smoke)

    toggle = commands.add_parser("toggle", help="pause or resume System-1, or show its state")
    toggle.add_argument("state", choices=["on", "off", "status"])
    toggle.set_defaults(func=cmd_toggle)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "options", None) and not getattr(args, "question", None):
        parser().error("--options needs --question")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
