#!/usr/bin/env python3
"""Claude Code hook for System-1: posts the hook input to the gateway and prints what it says.

UserPromptSubmit: the gateway's routing hint (and skill hint) as additional context, or nothing.
PreToolUse on the Agent tool: recorded by the gateway, nothing printed, the spawn unchanged.
SessionStart: one line for the user when something needs them (the gateway unreachable, its
config or keys broken, the engine not answering, System-1 paused, prompts waiting for labels),
else nothing.
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
WAITING_NUDGE = 30  # logged prompts without labels before /system1:calibrate is suggested


TRUE = ("true", "yes", "on", "1")
BLOCK = (">", ">-", ">+", "|", "|-", "|+")  # YAML block scalars: the value is on the indented lines below


def _frontmatter(path):
    """name, description and disable-model-invocation from a SKILL.md header (flat YAML:
    quoted or plain values, and folded or literal block descriptions)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if not lines or lines[0].strip() != "---":
        return None
    fields, index = {}, 1
    while index < len(lines) and lines[index].strip() != "---":
        key, _, value = lines[index].partition(":")
        value = value.strip()
        index += 1
        if value in BLOCK:
            block = []
            while index < len(lines) and (lines[index].startswith((" ", "\t")) or not lines[index].strip()):
                block.append(lines[index].strip())
                index += 1
            value = ("\n" if value.startswith("|") else " ").join(b for b in block if b)
        fields[key.strip()] = value.strip("\"'")
    fields.setdefault("name", path.parent.name)
    fields["disable-model-invocation"] = fields.get("disable-model-invocation", "").lower() in TRUE
    return {k: fields[k] for k in ("name", "description", "disable-model-invocation") if k in fields}


def _json(path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _inside(cwd, project):
    here, there = Path(cwd or ".").resolve(), Path(project).resolve()
    return here == there or there in here.parents


def plugin_skill_roots(home, cwd):
    """(plugin name, skills folder) of every installed plugin that the user, project or local
    settings enable (a later one overrides an earlier one), as Claude Code loads them."""
    enabled = {}
    for settings in (home / "settings.json", Path(cwd or ".") / ".claude" / "settings.json",
                     Path(cwd or ".") / ".claude" / "settings.local.json"):
        enabled.update(_json(settings).get("enabledPlugins") or {})
    installed = _json(home / "plugins" / "installed_plugins.json").get("plugins") or {}
    roots = []
    for plugin_id, installs in sorted(installed.items()):
        if enabled.get(plugin_id) is not True:
            continue
        for install in installs if isinstance(installs, list) else [installs]:  # format 2 lists installs
            project = install.get("projectPath")
            if install.get("installPath") and (project is None or _inside(cwd, project)):
                roots.append((plugin_id.split("@")[0], Path(install["installPath"]) / "skills"))
                break
    return roots


def skills(cwd):
    """The skills Claude can load by itself: the user's, the project's, and those of every
    enabled plugin (named `plugin:skill`, as Claude Code names them)."""
    home = Path.home() / ".claude"
    roots = [("", home / "skills"), ("", Path(cwd or ".") / ".claude" / "skills"), *plugin_skill_roots(home, cwd)]
    found = {}
    for plugin, root in roots:
        for skill_file in sorted(root.glob("*/SKILL.md")):
            skill = _frontmatter(skill_file)
            if skill and not skill["disable-model-invocation"]:
                skill["name"] = f"{plugin}:{skill['name']}" if plugin else skill["name"]
                found.setdefault(skill["name"], skill)
    return list(found.values())


def call(method, url, body, headers):
    """Send one request and return the decoded JSON reply; `OSError` for anything but a 200.
    Plain sockets for http (the local gateway): http.client and urllib cost more to import
    than the rest of the hook takes to run."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        import urllib.request

        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.load(response)
    head = [f"{method} {parts.path or '/'} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close",
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


def session_note(health):
    """The one line a session should start with, from the gateway's health, or None."""
    errors = health.get("config_errors") or []
    if errors:
        return (f"System-1's config is broken ({errors[0][:200]}). Fix it, then run "
                "`docker exec system1-gateway system1 reload`; /system1:doctor shows the rest.")
    if health.get("status") == "paused":
        return "System-1 is paused: every decision abstains until `docker exec system1-gateway system1 toggle on`."
    providers = health.get("providers") or []
    if providers and not providers[0].get("ok"):
        engine = providers[0]
        return (f"System-1's engine {engine.get('name')} is not answering ({engine.get('detail') or 'no detail'}). "
                "Start the stack with `make up` in the gateway's clone; /system1:doctor checks each layer.")
    waiting = (health.get("routing") or {}).get("prompts_waiting_for_labels") or 0
    if waiting >= WAITING_NUDGE:
        return f"System-1: {waiting} logged prompts are waiting for labels; /system1:calibrate labels them with you."
    return None


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


def session_start(gateway, headers):
    """SessionStart: a `systemMessage` for the user when something needs them."""
    try:
        health = call("GET", gateway + "/v1/health", b"", headers)
    except OSError as exc:
        if "HTTP 401" in str(exc):
            note = f"System-1's gateway at {gateway} needs an API key: set SYSTEM1_API_KEY for Claude Code."
        elif "HTTP 503" in str(exc):
            note = (f"System-1's gateway at {gateway} is closed because its API key configuration is broken; "
                    "/system1:doctor shows how to fix it.")
        else:
            note = (f"System-1's gateway is not reachable at {gateway}. Start it with `make up` in its clone, "
                    "or run /system1:setup to install it.")
    else:
        note = session_note(health)
    if note:
        print(json.dumps({"systemMessage": note}))


def main():
    try:
        event = json.loads(sys.stdin.read())
        name = event.get("hook_event_name", "UserPromptSubmit")
        headers = {"Content-Type": "application/json",
                   "X-System1-Client": os.environ.get("SYSTEM1_CLIENT") or os.environ.get("USER") or "claude-code"}
        if os.environ.get("SYSTEM1_API_KEY"):
            headers["Authorization"] = "Bearer " + os.environ["SYSTEM1_API_KEY"]
        gateway = (os.environ.get("SYSTEM1_GATEWAY_URL") or "http://127.0.0.1:8080").rstrip("/")
        if name == "SessionStart":
            session_start(gateway, headers)
            return 0
        if name == "UserPromptSubmit" and "skills" not in event:
            event["skills"] = skills(event.get("cwd"))
        answer = call("POST", gateway + "/v1/route", json.dumps(event).encode("utf-8"), headers)
        if name == "UserPromptSubmit" and answer.get("context"):
            print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                     "additionalContext": answer["context"]}}))
    except Exception:  # advisory only: any failure means no hint, never a blocked prompt
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
