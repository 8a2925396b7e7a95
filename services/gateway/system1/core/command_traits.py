"""What a shell command does, read from its words: traits a head weighs beside its wording.

The destructive-command head learns from a few hundred labelled commands, so a verb it never saw
(`shred`, `unpublish`, `terminate-instances`) is only a string to it. This reads a command the way
a careful reviewer skims one: it splits the line into simple commands (`;`, `&&`, `||`, `|`), steps
over wrappers (`sudo`, `env A=b`, `xargs`, `time` …), and names what each part does in a few
general traits: deletes, overwrites, rewrites history, stops processes, changes access, sends
something out, creates, only reads, only prints, a dry run, forced, recursive, aimed at a broad or
a regenerable target, SQL statements by their effect. `lexical.features` adds them, so the head's
fit decides what each trait weighs; nothing here decides an answer.

It is a skim, not a parser: a quoted string is one word, and anything it does not know adds no
trait. Lines longer than `MAX_CHARS` are read up to there.
"""

from __future__ import annotations

import re
import shlex

MAX_CHARS = 4000

# Words before the program: wrappers that run it, and the shell's own keywords.
_WRAPPERS = frozenset({"sudo", "doas", "env", "nice", "nohup", "time", "timeout", "xargs", "exec", "command",
                       "builtin", "watch", "stdbuf", "ionice", "chroot", "runuser", "su", "then", "do", "else"})
# A wrapper's options that take a value, so the value is not read as the program.
_WRAPPER_VALUES = frozenset({"-u", "-g", "-n", "-I", "-P", "-L", "-c", "-s", "-k"})

# Programs that do one thing whatever their arguments.
_PROGRAM_TRAITS: dict[str, frozenset[str]] = {
    "deletes": frozenset({"rm", "rmdir", "unlink", "shred", "wipefs", "srm", "userdel", "groupdel", "deluser",
                          "dropdb", "dropuser", "del", "erase", "rd", "remove-item"}),
    "overwrites": frozenset({"dd", "mkfs", "fdisk", "parted", "sfdisk", "gdisk", "truncate", "tee", "mkswap",
                             "set-content", "out-file"}),
    "stops": frozenset({"kill", "pkill", "killall", "reboot", "shutdown", "halt", "poweroff", "stop-process",
                        "stop-computer", "restart-computer"}),
    "changes-access": frozenset({"chmod", "chown", "chgrp", "setfacl", "passwd", "usermod", "iptables", "ip6tables",
                                 "ufw", "nft", "visudo", "chattr"}),
    "sends": frozenset({"mail", "sendmail", "mutt", "mailx", "twine", "send-mailmessage"}),
    "prints": frozenset({"echo", "printf", "print", "write-host", "write-output", "true", ":"}),
    "creates": frozenset({"mkdir", "touch", "new-item"}),
}
_COPIERS = frozenset({"mv", "cp", "rsync", "scp", "rename", "copy-item", "move-item", "install"})
_NO_CLOBBER = frozenset({"-n", "-i", "--no-clobber", "-b", "--backup", "--interactive", "--ignore-existing"})
_HTTP_CLIENTS = frozenset({"curl", "wget", "http", "invoke-webrequest", "invoke-restmethod"})
# Programs that read unless a flag below makes them write (`sed -i`, `find -delete`, `curl -o`).
_READERS = frozenset({
    "ls", "ll", "dir", "cat", "bat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ack", "wc",
    "du", "df", "ps", "top", "htop", "pwd", "whoami", "id", "uname", "date", "printenv", "which", "whereis", "type",
    "file", "stat", "tree", "diff", "cmp", "comm", "jq", "yq", "sort", "uniq", "cut", "tr", "column", "nl", "md5sum",
    "sha1sum", "sha256sum", "shasum", "getent", "history", "uptime", "free", "lsof", "netstat", "ss", "ping", "dig",
    "nslookup", "host", "traceroute", "man", "help", "locate", "dmesg", "lsblk", "blkid", "hostname", "last", "w",
    "who", "groups", "vmstat", "iostat", "nproc", "lscpu", "lsusb", "lspci", "test", "[", "realpath", "readlink",
    "basename", "dirname", "xxd", "hexdump", "od", "strings", "nm", "objdump", "ldd", "openssl", "get-childitem",
    "get-content", "get-process", "select-string", "test-path", "get-item", "findstr", "journalctl", "pg_dump",
    "mysqldump", "awk", "sed", "find", "tar", "zcat", "zgrep", "base64",
})
# Programs that write whatever they are given (an archive, or the files out of one).
_PACKERS = frozenset({"zip", "unzip", "gzip", "gunzip"})
_WRITES_WITH: dict[str, tuple[str, ...]] = {
    "sed": ("-i", "--in-place"), "awk": ("-i",), "sort": ("-o",), "find": ("-exec", "-ok"), "openssl": ("-out",),
    "curl": ("-o", "--output"), "wget": ("-o", "--output-document"),
    "tar": ("-x", "-c", "--extract", "--create", "--append"),
    "journalctl": ("--vacuum-size", "--vacuum-time", "--rotate"),
}
_DB_CLIENTS = frozenset({"sqlite3", "psql", "mysql", "mongosh", "mongo", "redis-cli", "clickhouse-client", "cqlsh"})
_KNOWN_PROGRAMS = frozenset().union(*_PROGRAM_TRAITS.values(), _COPIERS, _HTTP_CLIENTS, _READERS, _PACKERS,
                                     _DB_CLIENTS, {"ln", "crontab"})

# Subcommand words, read in the first few words after the program (`git branch -D`, `aws s3 rb`,
# `gcloud compute instances delete`, `terminate-instances`: a hyphenated word by its first part).
_DELETE_VERBS = frozenset({"delete", "remove", "rm", "rmi", "destroy", "purge", "prune", "drop", "wipe", "erase",
                           "uninstall", "unpublish", "terminate", "flushall", "flushdb", "del", "unlink", "deregister",
                           "rb", "clean", "clear", "expire", "unset", "deprovision", "decommission", "evict", "drain",
                           "revoke", "disable", "deactivate", "cancel", "undeploy", "unregister"})
_OVERWRITE_VERBS = frozenset({"apply", "replace", "restore", "overwrite", "import", "patch", "set", "update", "put",
                              "upgrade", "rollback", "rebase", "migrate", "sync", "mv", "move", "rename", "edit",
                              "taint", "force-unlock", "modify", "write", "load", "truncate", "compact"})
_STOP_VERBS = frozenset({"kill", "stop", "shutdown", "halt", "restart", "reboot", "pause", "suspend"})
_SEND_VERBS = frozenset({"publish", "push", "send", "release", "deploy", "post", "merge", "transfer", "pay",
                         "invoke", "trigger", "notify", "submit"})
_CREATE_VERBS = frozenset({"create", "add", "new", "init", "install", "build", "commit", "mb", "tag", "clone",
                           "make", "start", "run", "up", "generate", "scaffold", "fetch", "pull", "checkout", "switch",
                           "stash", "compile", "test", "lint", "format", "fmt", "bump", "mkdir", "touch", "cp"})
_READ_VERBS = frozenset({"list", "ls", "get", "describe", "show", "status", "info", "logs", "log", "view", "inspect",
                         "plan", "diff", "check", "validate", "search", "version", "help", "cat", "top", "explain",
                         "whoami", "history", "blame", "grep", "query", "head", "events", "stats", "output", "print",
                         "read", "find", "lookup", "can-i", "verify", "audit", "outdated", "freeze", "tree", "why",
                         "doctor", "config", "shortlog", "reflog", "ps", "images", "env", "watch", "dump", "export",
                         "report", "count", "scan", "select", "preview"})
_DRY_FLAGS = frozenset({"--dry-run", "--dryrun", "-whatif", "--check", "--plan", "--noop", "--simulate",
                        "--no-act", "--help", "--version", "-help", "--diff", "--preview"})
# Flags that skip a question or a safeguard.
_FORCE_FLAGS = frozenset({"-f", "--force", "-y", "--yes", "-auto-approve", "--auto-approve", "--no-preserve-root",
                          "--force-with-lease", "-force", "--assume-yes", "--noconfirm", "--no-confirm", "--confirm",
                          "-confirm:$false", "--hard", "--purge", "--grace-period=0", "--now",
                          "--skip-final-snapshot", "-9", "-kill"})
_RECURSIVE_FLAGS = frozenset({"-r", "-R", "--recursive", "-recurse", "/s"})
# Programs whose combined short flags (`-rf`, `-Rv`) read `r` as recursive and `f` as forced.
_COMBINED_FLAGS = frozenset({"rm", "cp", "mv", "chmod", "chown", "chgrp", "scp", "rsync", "del", "rd", "remove-item"})
_BROAD_TARGET = re.compile(r"^(?:/|~/?|\$home/?|/\*|\*|\.\*?|\./?\*?|/(?:etc|var|usr|home|root|opt|srv|boot|dev"
                           r"|lib|bin|data|mnt)(?:/[^/\s]*)?/?|c:\\.*|[a-z]:\\?)$")
_REGENERABLE = re.compile(r"(?:^|/)(?:build|dist|out|target|node_modules|__pycache__|\.cache|cache|\.pytest_cache|"
                          r"\.mypy_cache|\.tox|\.nox|\.next|\.nuxt|coverage|htmlcov|\.gradle|tmp|temp|\.parcel-cache|"
                          r"\.turbo|bin/debug|obj|\.eggs|[\w.-]*\.egg-info|\.ruff_cache|\.venv-cache|\.terraform)/?$|"
                          r"\.(?:pyc|pyo|o|class|log\.\d+|tmp)$|^/tmp/")
_SQL = {
    "sql-drop": re.compile(r"\bdrop\s+(?:table|database|schema|index|view|collection|user|role)\b"
                           r"|\.drop(?:database)?\(\)"),
    "sql-truncate": re.compile(r"\btruncate\s+(?:table\s+)?\w"),
    "sql-delete": re.compile(r"\bdelete\s+from\b|\.delete(?:many|one)\(|\bflushall\b|\bflushdb\b"),
    "sql-update": re.compile(r"\bupdate\s+\w+\s+set\b|\.update(?:many|one)\(|\balter\s+table\s+\w+\s+drop\b"),
    "sql-read": re.compile(r"\bselect\b|\bexplain\b|\bshow\s+\w|\\d[tn+]?\b|\.find\(|\.count|\bdescribe\b"),
}
_NO_WHERE = re.compile(r"\b(?:delete\s+from|update\s+\w+\s+set)\b(?![^;]*\bwhere\b)")
_WRITES = frozenset({"deletes", "overwrites", "stops", "changes-access", "sends", "rewrites-history"})
# What ends a simple command: a word of these characters alone (`;`, `&&`, `|`, `(` …), or a brace.
_SEPARATORS = frozenset(";&|()")
_BRACES = frozenset({"{", "}"})


def traits(command: str) -> set[str]:
    """The traits of a command line (empty for blank text)."""
    text = command[:MAX_CHARS]
    lowered = text.lower()
    found = {name for name, pattern in _SQL.items() if pattern.search(lowered)}
    if _NO_WHERE.search(lowered):
        found.add("sql-no-where")
    parts = [_simple(words) for words in _simple_commands(text)]
    found = found.union(*parts)
    # Only where every part is known to read (`curl … | sh` runs what it fetched).
    if parts and all(part & {"reads", "prints", "dry-run"} and not part & _WRITES for part in parts):
        found.add("only-reads")
    return found


def _words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: read it word by word
        return text.split()


def _simple_commands(text: str) -> list[list[str]]:
    """The line's simple commands, each its words, redirections kept as `>`/`>>` words."""
    commands: list[list[str]] = [[]]
    for word in _words(text.replace("\n", " ; ")):
        if word in _BRACES or set(word) <= _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [words for words in commands if words]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program a simple command runs (wrappers and `A=b` assignments stepped over), and its
    arguments."""
    index = 0
    while index < len(words):
        word = words[index].lower()
        if re.match(r"^\w+=", word) or word in _WRAPPERS:
            index += 1
        elif word.startswith("-") and index:  # a wrapper's option
            index += 2 if word in _WRAPPER_VALUES else 1
        else:
            break
    if index >= len(words):
        return "", []
    program = words[index].lower().rsplit("/", 1)[-1].rsplit("\\", 1)[-1].removesuffix(".exe")
    return program, words[index + 1:]


def _redirects(args: list[str]) -> tuple[list[str], set[str]]:
    """The arguments without redirections, and what the redirections do."""
    kept, found = [], set()
    index = 0
    while index < len(args):
        word = args[index]
        if word in (">", ">|", "&>", "1>", "2>"):
            target = args[index + 1] if index + 1 < len(args) else ""
            if target not in ("/dev/null", "&1", "&2", "/dev/stderr", "/dev/stdout"):
                found.add("overwrites")
                found.add("regenerable-target" if _REGENERABLE.search(target.lower()) else "writes-file")
            index += 2
        elif word == ">>":
            found.add("appends")
            index += 2
        elif word == "<":
            index += 2
        else:
            kept.append(word)
            index += 1
    return kept, found


def _simple(words: list[str]) -> set[str]:
    """The traits of one simple command."""
    program, args = _program(words)
    args, found = _redirects(args)
    if not program:
        return found
    lowered = [a.lower() for a in args]
    flags = {a for a in args if a.startswith("-") or len(a) == 2 and a.startswith("/")}
    targets = [a for a in lowered if not a.startswith("-")]
    if program in _KNOWN_PROGRAMS:
        found |= _by_program(program, lowered, flags)
    else:
        found |= _by_verb(_verbs(targets), lowered, flags)
    if flags & _DRY_FLAGS or any(a.startswith("--dry-run") for a in lowered):
        found.add("dry-run")
    # Short flags run together (`-rf`): their letters, for the programs that read them so.
    combined = "".join(f[1:].lower() for f in flags if f.startswith("-") and not f.startswith("--")) \
        if program in _COMBINED_FLAGS else ""
    if flags & _FORCE_FLAGS or "f" in combined or any(a.startswith("--force") for a in lowered):
        found.add("forced")
    if flags & _RECURSIVE_FLAGS or "r" in combined:
        found.add("recursive")
    if any(_BROAD_TARGET.match(t) for t in targets):
        found.add("broad-target")
    paths = [t for t in targets if "/" in t or "." in t]
    if paths and all(_REGENERABLE.search(t) for t in paths):
        found.add("regenerable-target")
    return found


def _verbs(targets: list[str]) -> set[str]:
    """The subcommand words among a command's first few words (`git branch -D`, `aws s3 rb`,
    `gcloud compute instances delete`); a hyphenated one (`terminate-instances`) also by its
    first part."""
    return {part for word in targets[:4] for part in (word, word.split("-", 1)[0])}


def _by_program(program: str, args: list[str], flags: set[str]) -> set[str]:
    """What a program known by name does (its flags decide for some)."""
    for trait, programs in _PROGRAM_TRAITS.items():
        if program in programs:
            return {trait}
    if program == "ln":
        return {"overwrites"} if any("f" in f for f in flags if not f.startswith("--")) else {"creates"}
    if program == "crontab":
        return {"deletes"} if "-r" in flags else {"reads"} if "-l" in flags else {"overwrites"}
    if program in _COPIERS:
        if any(a.startswith("--delete") or a == "--remove-source-files" for a in args):
            return {"deletes"}
        return {"backs-up"} if flags & _NO_CLOBBER else {"overwrites"}
    if program == "find" and ("-delete" in args or {"rm", "shred", "unlink"} & set(args)):
        return {"deletes"}
    if program == "sed" and any(a.startswith(("-i.", "--in-place=")) for a in args):
        return {"backs-up"}
    if program in _PACKERS and args or any(a.startswith(flag) for a in args for flag in _WRITES_WITH.get(program, ())):
        return {"overwrites"}
    if program == "tar" and args and args[0][:1] in ("x", "c"):  # `tar xzf`: the mode without a dash
        return {"overwrites"}
    if program in _HTTP_CLIENTS and "delete" in args:
        return {"deletes"}
    if program in _HTTP_CLIENTS and ({"put", "post", "patch"} & set(args) or any(
            a.startswith(("-d", "--data", "--post", "--method", "-t", "--upload")) for a in args)):
        return {"sends"}
    # A database client runs whatever its quoted statement says (the `sql-*` traits).
    return set() if program in _DB_CLIENTS else {"reads"}


def _by_verb(verbs: set[str], args: list[str], flags: set[str]) -> set[str]:
    """A tool with subcommands (git, docker, kubectl, cloud CLIs, package managers …) by its verbs."""
    found = set()
    if verbs & _DELETE_VERBS:
        found.add("deletes")
    if verbs & _OVERWRITE_VERBS or "--hard" in args or "--" in args and "checkout" in verbs:
        found.add("overwrites")
    if verbs & _STOP_VERBS:
        found.add("stops")
    if verbs & _SEND_VERBS:
        found.add("sends")
    if "push" in verbs and flags & {"-f", "--force", "--force-with-lease", "--delete", "-d"} or \
            verbs & {"rebase", "amend", "filter-branch", "filter-repo"} or "--amend" in args:
        found.add("rewrites-history")
    if verbs & {"branch", "tag", "stash", "worktree"} and flags & {"-d", "-D", "--delete"}:
        found.add("deletes")
    if not found and verbs & _CREATE_VERBS:
        found.add("creates")
    if not found and verbs & _READ_VERBS:
        found.add("reads")
    return found
