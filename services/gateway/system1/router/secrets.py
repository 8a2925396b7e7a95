"""Credentials in text, for the router's pre-check.

Yelp's `detect-secrets` detectors (AWS, GitHub, Slack, Stripe, JWTs, private keys, basic-auth
URLs, `password = …` keywords and the rest), each with only the false-positive filters meant for
it: a vendor's pattern (an `AKIA…` key id, a `ghp_…` token) is a credential wherever it stands,
so the filters that judge the line around a value (`x = get_secret()` is a reference, `{x}` a
template, an `id =` a name) apply to the keyword detector alone, and the template filters to a
URL's password too. The library applies them to
every detector, which dropped a key on any line shaped like `s3 = boto3.client(..., key='AKIA…')`.
Its entropy detectors are left out: on prose they flag ordinary words.

Besides the library's: the vendors it does not know (Anthropic, OpenAI project keys, Hugging
Face, Google, GitLab, npm, Vault, Alibaba Cloud), an `Authorization: Basic|Bearer|Token …`
header, a value given to a name that says it holds a credential (`DB_PASSWORD=…`,
`X-API-Key: …`, `?access_token=…`, quoted or not, `define('DB_PASSWORD', '…')`, `<Pass>…</Pass>`,
a `.netrc` password) and a password on a command line (`mysql -p'…'`, `--password=…`,
`curl -u user:…`). A value that is a placeholder (`xxxx`, `***`, `...`, `your-key-here`,
`YOUR_API_KEY`, `${VAR}`, a tutorial's `user:password`) or a reference (a call) is none.

A detector reads only the lines that could hold what it looks for, which keeps a long prompt's
scan short: lines with a token of 20 or more characters (every pattern-based detector's shortest
match but Artifactory's), a URL with credentials or a key header; lines with Artifactory's
prefixes for its detector; lines with a keyword stem for the keyword one.

Documented example keys (AWS's `AKIAIOSFODNN7EXAMPLE`, jwt.io's token) are found like any other
key: a placeholder the detectors cannot tell from a value counts as one.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.keyword import KeywordDetector

#: Detectors that would flag text that is not a credential (random-looking words, public IPs).
LEFT_OUT = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"})
_MAY_HOLD_TOKEN = re.compile(r"[\w+/=.\-]{20,}|://[^\s/]*@|PRIVATE KEY|PuTTY")
#: Artifactory's tokens start AKC or AP and may be as short as 11 characters.
_MAY_HOLD_ARTIFACTORY = re.compile(r"A(?:KC|P[\dA-F])[a-zA-Z0-9]{8,}")
#: Every keyword the keyword detector knows contains one of these.
_MAY_HOLD_KEYWORD = re.compile(r"key|pass|pwd|secret|contras", re.IGNORECASE)
#: Credentials in a URL, with the punctuation RFC 3986 allows in a password (detect-secrets'
#: own pattern leaves out `!$&'()*+,;=`, which real passwords hold). A scheme starts only where
#: no scheme character precedes it: without that, every letter of a long run would start a
#: match that scans the run again (quadratic time on one long word).
_URL_CREDENTIALS = re.compile(r"(?<![\w+.\-])[A-Za-z][\w+.\-]*://[^\s:/?#@\[\]]*:([^\s/?#@\[\]]+)@")
BASIC_AUTH = "Basic Auth Credentials"
#: Vendors' key shapes the library does not know. Each starts where no key character precedes
#: it, so the scan stays linear in the text.
_VENDOR_KEYS = {
    "Anthropic API Key": re.compile(r"(?<![\w-])sk-ant-(?:api|admin)\d{2}-[\w-]{40,}"),
    "OpenAI Project Key": re.compile(r"(?<![\w-])sk-(?:proj|svcacct|admin)-[\w-]{40,}"),
    "Hugging Face Token": re.compile(r"(?<!\w)hf_[A-Za-z0-9]{30,}"),
    "Google API Key": re.compile(r"(?<![\w-])AIza[\w-]{35}"),
    "GitLab Token": re.compile(r"(?<![\w-])glpat-[\w-]{20,}"),
    "GitHub Fine-grained Token": re.compile(r"(?<!\w)github_pat_\w{50,}"),
    "npm Token": re.compile(r"(?<!\w)npm_[A-Za-z0-9]{36}"),
    "Vault Token": re.compile(r"(?<![\w.])hv[sbr]\.[\w-]{24,}"),
    "Alibaba Cloud Access Key": re.compile(r"(?<!\w)LTAI[A-Za-z0-9]{12,20}\b"),
}
#: A credential sent in a header: `Authorization: Basic dXNlcjpwYXNz…`, `Bearer …`, `Token …`.
_AUTH_HEADER = re.compile(r"(?i:authorization)[\"']?[ \t]{0,3}[:=]?[ \t]{0,3}[\"']?(?i:basic|bearer|token)[ \t]{1,3}"
                          r"([A-Za-z0-9._~+/\-]{16,}=*)")
AUTH_HEADER = "Authorization Header"
#: `name = value`, `name: value`, `NAME=value`, `?name=value` for a name that says it holds a
#: credential, unquoted too (the keyword detector wants quotes outside the files it knows). It is
#: a lookahead, so `config: password=…` is read from each name; the repeats are bounded, so the
#: scan stays linear.
_ASSIGNED = re.compile(r"(?<![\w.\-])(?=([A-Za-z_][\w.\-]{0,60})[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?"
                       r"([^\s\"'`;,&<>)]{8,200}))")
_CREDENTIAL_NAME = re.compile(r"password|passwd|pwd|pass$|secret|token|apikey|accesskey|authkey|privatekey|credential")
#: Names that hold something about a credential, not the credential itself.
_ABOUT_A_CREDENTIAL = re.compile(r"(?:id|name|file|path|url|uri|type|length|len|count|header|env|field|policy|expiry|"
                                 r"expires|ttl|endpoint|prefix|hash|hint|reset|required|enabled|policy)$")
#: A password on a command line: `-p'…'` (mysql), `--password=…`, `-u user -p …`, `-u user:…` (curl).
_FLAG = re.compile(r"(?<!\S)(?:-p[\"']|--password[= ]|--token[= ]|--api-key[= ]|-u[ \t]{1,3}\S{1,60}[ \t]{1,3}-p[ \t]{1,3}|"
                   r"(?:-u|--user)[ \t=]{1,3}[\"']?[^\s:\"']{1,60}:)"
                   r"[\"']?([^\s\"']{6,200})")
#: A credential given by a name in other shapes: `define('DB_PASSWORD', '…')` (a quoted name, a
#: comma, a quoted value), `<Pass>…</Pass>` (XML) and a `.netrc` line `password …`.
_QUOTED_PAIR = re.compile(r"([\"'])([A-Za-z_][\w.\-]{0,60})\1[ \t]{0,3},[ \t]{0,3}[\"']([^\s\"']{6,200})[\"']")
_ELEMENT = re.compile(r"<((?i:pass|password|passwd|secret|token|apikey|api_key))\b[^<>]{0,60}>([^<\s]{6,200})</")
_NETRC = re.compile(r"(?m)^[ \t]*password[ \t]+(\S{6,200})[ \t]*$")
ASSIGNED = "Assigned Credential"
#: A redacted or elided run, wherever it stands in a value.
_REDACTED = r"x{4,}|X{4,}|\*{3,}|\.{3}"
#: Values that stand where a credential would go: a made-up or redacted one, a reference.
_PLACEHOLDER_VALUE = re.compile(_REDACTED + r"|\$\{|^\$|\{\{|%\(|\(|^(?:true|false|null|none)$|"
                                r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$|"  # a dotted name: process.env.KEY, self.token
                                r"(?i:your|example|changeme|placeholder|redacted|dummy|sample|here|xxx)", re.IGNORECASE)


@cache
def _detectors() -> list[tuple[re.Pattern[str], list[BasePlugin], bool]]:
    """Each group of detectors, the test a line must pass to be read by them, and whether they
    read one line at a time."""
    classes = [cls for cls in get_mapping_from_secret_type_to_class().values() if cls.__name__ not in LEFT_OUT]
    return [(_MAY_HOLD_TOKEN, [cls() for cls in classes if cls not in (KeywordDetector, ArtifactoryDetector)], False),
            (_MAY_HOLD_ARTIFACTORY, [ArtifactoryDetector()], False),
            (_MAY_HOLD_KEYWORD, [KeywordDetector()], True)]


#: A value that names what belongs there instead of holding it: `YOUR_API_KEY`, `your-key`,
#: `DEIN_SCHLUESSEL`, `tu-clave-aqui`, `sk_test_...`, `USER:PASSWORD`, a redacted run, or a
#: word every tutorial uses (`password`, `changeme`). Whole-value tests only: a real password
#: that merely contains such a word still counts.
_NAMED_PLACEHOLDER = re.compile(
    _REDACTED + r"|…|"
    # An environment variable's name that says what it holds (`PROD_DB_2024` may be a password).
    r"^(?=[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASS|PWD|SCHLUESSEL|CLAVE|VALUE|HERE))[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|"
    r"^(?i:your|my|dein|deine|ihr|tu|tus|votre|ton|seu|sua|tuo|il_tuo|la_tua)[_\-\s]|"
    r"^(?i:password|passwd|pass|pwd|secret|changeme|placeholder|example|postgres|test|user)$")


def _placeholder(secret: str) -> bool:
    """`{name}`, `<name>`, `${NAME}`, `$NAME` or a named placeholder: where a value would go,
    not a value."""
    return (heuristic.is_templated_secret(secret) or heuristic.is_prefixed_with_dollar_sign(secret)
            or bool(_NAMED_PLACEHOLDER.search(secret)))


def _kept(secret: str, line: str, plugin: BasePlugin) -> bool:
    """Whether a found value counts, by the filters meant for its detector."""
    if heuristic.is_sequential_string(secret):  # ABCDEF…, 0123…: a made-up value in any shape
        return False
    if isinstance(plugin, BasicAuthDetector):  # a URL's password may be a template
        return not _placeholder(secret)
    if not isinstance(plugin, KeywordDetector):
        return True
    # What a keyword (`password = …`) names may be no value at all: a call, a lookup, an id, a
    # template, a run of asterisks.
    return not (heuristic.is_potential_uuid(secret) or heuristic.is_likely_id_string(secret, line, plugin)
                or _placeholder(secret) or heuristic.is_not_alphanumeric_string(secret)
                or heuristic.is_indirect_reference(line))


def secrets_in(text: str) -> set[str]:
    """The kinds of credential in `text`."""
    found: set[str] = set()
    for gate, detectors, per_line in _detectors():
        chosen = _lines_matching(gate, text)
        # Regex detectors find every match in the joined lines; the keyword detector stops at a
        # string's first match, so it reads line by line.
        for chunk in chosen if per_line else ["\n".join(chosen)] if chosen else []:
            for detector in detectors:
                if detector.secret_type not in found and any(_kept(s, _line_of(chunk, s), detector)
                                                             for s in detector.analyze_string(chunk)):
                    found.add(detector.secret_type)
    if BASIC_AUTH not in found and any(not _placeholder(p) for p in _URL_CREDENTIALS.findall(text)):
        found.add(BASIC_AUTH)
    found |= {kind for kind, pattern in _VENDOR_KEYS.items() if pattern.search(text)}
    if any(not heuristic.is_sequential_string(value) for value in _AUTH_HEADER.findall(text)):
        found.add(AUTH_HEADER)
    if "Secret Keyword" not in found and _assigned_credential(text):
        found.add(ASSIGNED)
    return found


def _assigned_credential(text: str) -> bool:
    """Whether `text` gives a credential-like value to a credential's name, in any of the shapes
    above, or passes one on a command line; each shape is scanned only until one is found."""
    named = itertools.chain((m.group(1, 2) for m in _ASSIGNED.finditer(text)),
                            (m.group(2, 3) for m in _QUOTED_PAIR.finditer(text)),
                            (m.group(1, 2) for m in _ELEMENT.finditer(text)))
    passed = (m.group(1) for pattern in (_FLAG, _NETRC) for m in pattern.finditer(text))
    return any(_named_credential(name, value) for name, value in named) or any(_value_like(v) for v in passed)


def _value_like(value: str) -> bool:
    """Whether a value looks like a credential: no placeholder or reference, and with a digit
    or both cases (a word like `secret-here` is no key)."""
    if _PLACEHOLDER_VALUE.search(value) or heuristic.is_sequential_string(value):
        return False
    letters = any(c.isalpha() for c in value)
    return letters and (any(c.isdigit() for c in value) or (value != value.lower() and value != value.upper()))


def _named_credential(name: str, value: str) -> bool:
    bare = re.sub(r"[\W_]", "", name).lower()
    return bool(_CREDENTIAL_NAME.search(bare)) and not _ABOUT_A_CREDENTIAL.search(bare) and _value_like(value)


def _line_around(text: str, start: int, end: int) -> tuple[str, int]:
    """The line of `text` that holds text[start:end], and where that line ends."""
    stop = text.find("\n", end)
    stop = len(text) if stop < 0 else stop
    return text[text.rfind("\n", 0, start) + 1: stop], stop


def _lines_matching(gate: re.Pattern[str], text: str) -> list[str]:
    """The lines of `text` where `gate` matches, found in one pass over the whole text."""
    lines, line_end = [], -1
    for match in gate.finditer(text):
        if match.start() > line_end:
            line, line_end = _line_around(text, match.start(), match.end())
            lines.append(line)
    return lines


def _line_of(chunk: str, secret: str) -> str:
    at = chunk.find(secret)
    return _line_around(chunk, at, at + len(secret))[0]
