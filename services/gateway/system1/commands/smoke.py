"""`smoke`: start an MCP server exactly as a client does and check it, one verdict line per step."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from . import EXIT_DECISION, EXIT_HEALTH, EXIT_OK, EXIT_START


def _line(label: str, verdict: str, detail: str = "") -> None:
    print(f"{label:<9} {verdict:<5} {detail}".rstrip(), flush=True)


def run(args: argparse.Namespace) -> int:
    import anyio

    command = shlex.split(args.command) if args.command else [sys.executable, "-m", "system1", "mcp"]
    if args.standalone and not args.command:
        command.append("--standalone")
    _line("START", "", shlex.join(command))
    if not args.standalone:
        from ..client.service_client import default_url

        _line("GATEWAY", "", f"{args.url or default_url()} (for a bridge started by this command)")
    try:
        return anyio.run(_smoke, command, args)
    except TimeoutError:
        _line("RESULT", "FAIL", f"no answer within {args.timeout:g} s")
        return EXIT_START


async def _smoke(command: list[str], args: argparse.Namespace) -> int:
    import anyio
    from mcp import Client, StdioServerParameters

    env = dict(os.environ)
    if args.url:
        env["SYSTEM1_GATEWAY_URL"] = args.url
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
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
            _line("HEALTH", verdict, f"{status}; {errors or probes or health.get('detail') or 'no providers'}")
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
