"""`serve`, `mcp`, `reload`, `keys` and `toggle`: running the gateway and talking to it."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, TextIO

from ..core.paths import install_dir, mcp_socket_path
from . import EXIT_HEALTH, EXIT_OK, EXIT_START, client_name, talk_to_service

if TYPE_CHECKING:
    from ..client.service_client import ServiceClient


def mcp(args: argparse.Namespace) -> int:
    if args.standalone:
        return _mcp_in_process()
    from ..client.relay import relay

    # Beside a running service: relay to its local socket, importing nothing more.
    relayed = relay(mcp_socket_path(install_dir(os.environ)), client_name())
    return _mcp_over_http() if relayed is None else relayed


def _mcp_over_http() -> int:
    """The tools served here, each call forwarded to the service's REST API (a service on
    another host, or none: health then says `down`)."""
    from ..core.logs import configure_logging
    from ..client.bridge import ServiceBackend
    from ..client.service_client import ServiceClient
    from ..service.mcp import run_stdio

    configure_logging(os.environ.get("SYSTEM1_LOG_LEVEL", "INFO").upper())

    async def service_backend() -> ServiceBackend:
        return ServiceBackend(ServiceClient.from_env())

    run_stdio(service_backend, client_name())
    return EXIT_OK


def _mcp_in_process() -> int:
    from ..core.config import load_config
    from ..core.logs import configure_logging
    from ..service.mcp import run_stdio

    config = load_config()
    gateway_settings = config.settings.gateway
    configure_logging(gateway_settings.log_level, gateway_settings.log_file)

    async def core_backend():
        from ..core.gateway import Gateway
        from ..service.standalone import CoreBackend

        return CoreBackend(Gateway(config))

    run_stdio(core_backend, client_name())
    return EXIT_OK


def serve(args: argparse.Namespace) -> int:
    from ..service.server import catch_early_reloads

    early_reloads = catch_early_reloads()  # before the slow imports below
    from ..core.logs import configure_logging
    from ..service.server import serve as run_server
    from ..service.service import Service

    service = Service()
    settings = service.config.settings
    configure_logging(settings.gateway.log_level, settings.gateway.log_file)
    run_server(service, args.host or settings.service.host, args.port or settings.service.port, early_reloads)
    return EXIT_OK


async def _reload(service: ServiceClient, out: TextIO | None = None) -> int:
    """Have the service reload; `out` (standard output by default) gets the confirmation."""
    body = await service.reload()
    if body.get("reloaded"):
        print("reloaded the config, calibration fits and learned heads", file=out or sys.stdout)
        return EXIT_OK
    print("reload refused, the running config stays:", *body.get("errors", [body]), sep="\n  ", file=sys.stderr)
    return EXIT_HEALTH


def reload(args: argparse.Namespace) -> int:
    return talk_to_service(args, _reload)


def keys(args: argparse.Namespace) -> int:
    """Add a key to the keys file, then have the running service read it."""
    from pathlib import Path

    from ..service.auth import add_key

    from ..core.config import load_config

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
    if talk_to_service(args, _reload) != EXIT_OK:
        print("The key takes effect when the service next starts or reloads (`system1 reload`).", file=sys.stderr)
    return EXIT_OK


def toggle(args: argparse.Namespace) -> int:
    from ..core.gateway import PAUSE_FILE

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
