"""The wording of a judged text as hashed features, for heads that read it beside the embedding.

A sentence embedding blurs the words that decide some questions: `rm -r` and `rm -i`, "salary"
in a note about a named colleague. A head may add a linear term over these features: the
text's lower-cased words and flags, adjacent word pairs, and the four-character pieces of each
word (which carry across inflections and languages), each hashed (CRC-32, stable across
processes and machines) into one of `DIM` buckets, present or not, the vector scaled to unit
length. The text is the request's context (`plain_text`), so `system1 learn` and the gateway
compute the same features from the same request.
"""

from __future__ import annotations

import math
import re
import zlib
from typing import Any

from ..providers.base import plain_text
from .command_traits import traits

DIM = 1 << 14
_TOKEN = re.compile(r"--?\w[\w-]*|\w+|>>|[<>|&;]+")
_WORD = re.compile(r"\w{3,}")


def features(state: Any) -> dict[int, float]:
    """The context's features: bucket index to value, of unit length (empty for no text)."""
    text = plain_text(state).lower()
    tokens = _TOKEN.findall(text)
    names = {"u:" + t for t in tokens} | {f"b:{a} {b}" for a, b in zip(tokens, tokens[1:])}
    for word in _WORD.findall(text):
        padded = f"<{word}>"
        names.update("c:" + padded[i:i + 4] for i in range(len(padded) - 3))
    buckets = {_bucket(name) for name in names}
    found = dict.fromkeys(sorted(buckets), 1.0 / math.sqrt(len(buckets))) if buckets else {}
    command = state.get("command") if isinstance(state, dict) else None
    if isinstance(command, str):
        # What the command does, each trait at full weight: one general feature, not one of
        # a hundred words, so the head can lean on it for verbs its rows never showed.
        found.update((_bucket("k:" + name), 1.0) for name in sorted(traits(command)))
    return found


def _bucket(name: str) -> int:
    return zlib.crc32(name.encode()) % DIM
