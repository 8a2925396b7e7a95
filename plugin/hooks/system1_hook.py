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
import sys
import urllib.request
from pathlib import Path

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


def main():
    try:
        event = json.loads(sys.stdin.read())
        if event.get("hook_event_name", "UserPromptSubmit") == "UserPromptSubmit" and "skills" not in event:
            event["skills"] = skills(event.get("cwd"))
        event["home"] = str(Path.home())
        headers = {"Content-Type": "application/json",
                   "X-System1-Client": os.environ.get("SYSTEM1_CLIENT") or os.environ.get("USER") or "claude-code"}
        if os.environ.get("SYSTEM1_API_KEY"):
            headers["Authorization"] = "Bearer " + os.environ["SYSTEM1_API_KEY"]
        url = (os.environ.get("SYSTEM1_GATEWAY_URL") or "http://127.0.0.1:8080").rstrip("/") + "/v1/route"
        request = urllib.request.Request(url, data=json.dumps(event).encode("utf-8"), headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        with opener.open(request, timeout=TIMEOUT_S) as response:
            answer = json.load(response)
        if event.get("hook_event_name", "UserPromptSubmit") == "UserPromptSubmit" and answer.get("context"):
            print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                     "additionalContext": answer["context"]}}))
    except Exception:  # advisory only: any failure means no hint, never a blocked prompt
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
