"""Who may call the service: API keys (hashed at rest) and the Host-header allow-list.

Ports bind loopback only, but every local user can reach loopback, so the HTTP API and `/mcp`
take an optional key list. Keys are stored as SHA-256 hashes, one `name sha256:<hex>` per line
in `[service] api_keys_file` (`system1 keys add NAME` writes one and prints the key once), or
given as `name:key` pairs in `SYSTEM1_API_KEYS`. The service also writes a random bridge token
into its state directory: whoever can read it (the stdio bridge started by `docker exec`) is
trusted to name its user in `X-System1-Client`.

The Host allow-list (loopback names, the compose service name, and any configured) stops a web
page from driving the API through DNS rebinding.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..client.token import BRIDGE

DEFAULT_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "gateway", "system1-gateway"})
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


class KeyRing:
    """Maps a presented bearer key to the client name it belongs to."""

    def __init__(self, hashes: Mapping[str, str], bridge_hash: str | None = None) -> None:
        self._hashes = dict(hashes)  # hash -> name
        self._bridge_hash = bridge_hash

    @property
    def required(self) -> bool:
        return bool(self._hashes)

    def identify(self, presented: str) -> str | None:
        digest = hash_key(presented)
        found = None
        for stored, name in self._hashes.items():
            if hmac.compare_digest(stored, digest):
                found = name
        if self._bridge_hash and hmac.compare_digest(self._bridge_hash, digest):
            found = BRIDGE
        return found

    @classmethod
    def load(cls, path: str, env: Mapping[str, str], bridge_token: str | None) -> tuple[KeyRing, list[str]]:
        hashes: dict[str, str] = {}
        errors: list[str] = []
        if path:
            file = Path(path).expanduser()
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                errors.append(f"{file}: cannot read the API keys file: {exc.strerror or exc}")
                lines = []
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) != 2 or not valid_name(parts[0]) or not re.fullmatch(r"sha256:[0-9a-f]{64}", parts[1]):
                    errors.append(f"{file}:{number}: expected `name sha256:<64 hex digits>`")
                    continue
                hashes[parts[1]] = parts[0]
        entries = [p.strip() for p in env.get("SYSTEM1_API_KEYS", "").split(",") if p.strip()]
        for number, pair in enumerate(entries, 1):
            name, _, key = pair.partition(":")
            if not valid_name(name) or len(key) < 16:
                # Never echo the entry: without its colon, all of it may be the key.
                errors.append(f"SYSTEM1_API_KEYS: entry {number} is not `name:key` with a name of letters, "
                              "digits, '.', '_' or '-' and a key of 16+ characters")
                continue
            hashes[hash_key(key)] = name
        return cls(hashes, hash_key(bridge_token) if bridge_token else None), errors


def add_key(path: Path, name: str) -> str:
    """Append a new key for `name` to the keys file and return the key (shown once)."""
    if not valid_name(name):
        raise ValueError(f"client name {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
    key = "s1_" + secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{name} {hash_key(key)}\n")
    os.chmod(path, 0o600)
    return key


def host_allowed(host_header: str | None, extra: Iterable[str]) -> bool:
    if not host_header:
        return False
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host in DEFAULT_HOSTS or host in {h.lower() for h in extra}
