#!/usr/bin/env python3
"""Claude Code hook for System-1: posts the hook input to the gateway and prints what it says.

UserPromptSubmit: the gateway's routing hint (and skill hint) as additional context, or nothing.
PreToolUse on the Agent tool: recorded by the gateway, nothing printed, the spawn unchanged.
Standard library only and silent on every failure: it never blocks or rewrites a prompt. The
gateway is SYSTEM1_GATEWAY_URL (default http://127.0.0.1:8080); the caller is SYSTEM1_CLIENT
(default $USER); SYSTEM1_API_KEY is sent when set.
"""

import json
import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

TIMEOUT_S = 1.8  # the gateway's own budget is 1.5 s


def _frontmatter(path):
    """name, description and disable-model-invocation from a SKILL.md header."""
    fields = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip().strip("\"'")
    if not fields.get("name"):
        fields["name"] = path.parent.name
    fields["disable-model-invocation"] = fields.get("disable-model-invocation", "").lower() == "true"
    return {k: fields[k] for k in ("name", "description", "disable-model-invocation") if k in fields}


def skills(cwd):
    """The skills Claude can load: the user's, the project's and every installed plugin's."""
    home = Path.home() / ".claude"
    roots = [home / "skills", Path(cwd or ".") / ".claude" / "skills"]
    roots += sorted((home / "plugins").glob("**/skills"))
    found = {}
    for root in roots:
        for skill_file in sorted(root.glob("*/SKILL.md")):
            skill = _frontmatter(skill_file)
            if skill and not skill["disable-model-invocation"]:
                found.setdefault(skill["name"], skill)
    return list(found.values())


def post(url, body, headers):
    """POST JSON and return the decoded reply. Plain sockets for http (the local gateway):
    http.client and urllib cost more to import than the rest of the hook takes to run."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        import urllib.request

        request = urllib.request.Request(url, data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.load(response)
    head = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close",
            f"Content-Length: {len(body)}"] + [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection((parts.hostname, parts.port or 80), timeout=TIMEOUT_S) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    header, _, payload = raw.partition(b"\r\n\r\n")
    status = header.split(b" ", 2)[1]
    if status != b"200":
        raise OSError(f"HTTP {status.decode()}")
    if b"transfer-encoding: chunked" in header.lower():
        payload = _dechunk(payload)
    return json.loads(payload)


def _dechunk(data):
    out = b""
    while data:
        size, _, rest = data.partition(b"\r\n")
        length = int(size.split(b";")[0], 16)
        if length == 0:
            break
        out += rest[:length]
        data = rest[length + 2:]
    return out


def main():
    try:
        event = json.loads(sys.stdin.read())
        if event.get("hook_event_name", "UserPromptSubmit") == "UserPromptSubmit" and "skills" not in event:
            event["skills"] = skills(event.get("cwd"))
        headers = {"Content-Type": "application/json",
                   "X-System1-Client": os.environ.get("SYSTEM1_CLIENT") or os.environ.get("USER") or "claude-code"}
        if os.environ.get("SYSTEM1_API_KEY"):
            headers["Authorization"] = "Bearer " + os.environ["SYSTEM1_API_KEY"]
        url = (os.environ.get("SYSTEM1_GATEWAY_URL") or "http://127.0.0.1:8080").rstrip("/") + "/v1/route"
        answer = post(url, json.dumps(event).encode("utf-8"), headers)
        if event.get("hook_event_name", "UserPromptSubmit") == "UserPromptSubmit" and answer.get("context"):
            print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                     "additionalContext": answer["context"]}}))
    except Exception:  # advisory only: any failure means no hint, never a blocked prompt
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
