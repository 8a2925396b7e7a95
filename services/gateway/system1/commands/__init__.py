"""The `system1` subcommands, one module per family; `cli.py` holds the parser.

Commands that talk to a running service do it through `client.service_client.ServiceClient`, with
`talk_to_service`: the gateway is `--url` (else `SYSTEM1_GATEWAY_URL`), an unreachable one is
one line naming it and why, and the gateway that answered is named on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..client.service_client import ServiceClient

EXIT_OK, EXIT_START, EXIT_HEALTH, EXIT_DECISION = 0, 1, 2, 3


def client_name() -> str:
    return os.environ.get("SYSTEM1_CLIENT") or "local"


def write_learned(command: str, path: Path, write: Callable[[Path], None]) -> bool:
    """Write a learned file (fits, heads, router skills); False, having said why, when its folder
    cannot be written, as when several gateway replicas share a read-only one."""
    try:
        write(path)
    except OSError as exc:
        print(f"system1 {command}: cannot write {path}: {exc.strerror or exc}. Where [service] learned_dir is a "
              "folder the gateways share read-only, update what fills it instead (deploy/k8s/README.md).",
              file=sys.stderr)
        return False
    return True


def talk_to_service(args: argparse.Namespace, work: Callable[[ServiceClient], Awaitable[int]]) -> int:
    """Run `work` with a client of the service named by `args`; its exit code, or EXIT_START
    when the gateway gave no usable answer."""
    from ..client.service_client import GatewayError, ServiceClient

    client = ServiceClient.from_env(url=args.url, transport=getattr(args, "transport", None))

    async def main() -> int:
        async with client:
            return await work(client)

    try:
        code = asyncio.run(main())
    except GatewayError as exc:
        print(f"system1 {args.command}: {exc}", file=sys.stderr)
        return EXIT_START
    print(f"gateway: {client.url}", file=sys.stderr)
    return code
