"""Everything of a chat request that would reach an upstream, as the text the pre-check reads.

Not only the messages' text: tool definitions, `name` fields, `metadata`, image URLs, document
and file parts, tool calls and their results, and any field a client adds. Every string in the
body is read but the model's name; a value is read with its field's name before it
(`api_key: …`), so a keyword detector sees what it names.

Before reading, text is normalised (Unicode NFKC, so full-width letters are letters; zero-width
characters and soft hyphens removed, so a joiner cannot split a key), and what is encoded in it
is decoded and read as well: a base64 run that decodes to text, a URL-encoded string. Binary
payloads (an image's or a PDF's bytes, by their media type) are not read: their size counts, the
pixels and pages are no text the pre-check can see.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_plus

#: Characters that show nothing: zero-width space, joiners, word joiner, byte-order mark, soft
#: hyphen, Mongolian vowel separator, and the invisible operators.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u2061\u2062\u2063\u2064"))
#: A run of base64 (standard or URL-safe alphabet) long enough to hold a credential.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,}={0,2}")
_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
#: `data:<media type>;base64,<payload>`
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[\w.-]+)*;base64,", re.IGNORECASE)
#: Fields whose value is the text itself: read without their name.
_TEXT_FIELDS = frozenset({"content", "text"})
#: Decoded text counts as text when at least this share of it is printable.
_PRINTABLE_SHARE = 0.9
#: How deep encodings inside encodings are undone (base64 of a URL-encoded string, say).
_DEPTH = 2


def normalised(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def _textual(media_type: str | None) -> bool:
    kind = (media_type or "").lower()
    return kind.startswith("text/") or kind in ("application/json", "application/x-yaml", "application/yaml",
                                               "application/xml", "application/toml", "application/x-sh")


def _as_text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    return text if text and printable >= _PRINTABLE_SHARE * len(text) else None


def _unbase64(run: str) -> str | None:
    padded = run.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _as_text(raw)


def decoded(text: str, depth: int = _DEPTH) -> Iterator[str]:
    """What `text` holds encoded: each base64 run that decodes to text, and the URL-decoded
    text; and what those hold in turn, `depth` levels down."""
    if depth <= 0:
        return
    found = []
    if _URL_ESCAPE.search(text):
        found.append(unquote_plus(text))
    found += [t for t in map(_unbase64, (m.group() for m in _BASE64_RUN.finditer(text))) if t]
    for inner in found:
        inner = normalised(inner)
        yield inner
        yield from decoded(inner, depth - 1)


def _payload(value: str) -> str | None:
    """A string as the pre-check reads it: a data URL's binary payload left out, a textual one
    decoded."""
    match = _DATA_URL.match(value)
    if match is None:
        return value
    if not _textual(match.group(1)):
        return value[:match.end()]
    return _unbase64(value[match.end():])


def _walk(value: Any, out: list[str]) -> None:
    """Every string under `value` into `out`, each after its field's name; iterative, so a body
    nested as deep as its parser allows cannot exhaust the stack."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, field = stack.pop()
        if isinstance(item, str):
            text = _payload(item)
            if text:
                out.append(f"{field}: {text}" if field and field not in _TEXT_FIELDS else text)
        elif isinstance(item, dict):
            # An Anthropic source: `data` is base64 of `media_type`, read only where that is text.
            binary = item.get("type") == "base64"
            media = item.get("media_type") if isinstance(item.get("media_type"), str) else None
            for key, inner in reversed(item.items()):
                if key == "data" and binary and isinstance(inner, str):
                    text = _unbase64(inner) if _textual(media) else None
                    out.extend([text] if text else [])
                else:
                    stack.append((inner, str(key)))
        elif isinstance(item, list):
            stack.extend((inner, field) for inner in reversed(item))


def readable(body: Any) -> tuple[str, ...]:
    """The texts of `body` the pre-check reads: normalised, with what they hold encoded."""
    out: list[str] = []
    _walk({k: v for k, v in body.items() if k != "model"} if isinstance(body, dict) else body, out)
    texts = [normalised(text) for text in out]
    return tuple(texts + [inner for text in texts for inner in decoded(text)])
