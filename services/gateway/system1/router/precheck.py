"""The router's local pre-check, run before anything leaves the machine: what the request needs
(tools, images, input tokens) and whether it holds secrets (`secrets.py`) or personal data
(`personal.py`), in every part of the request an upstream would receive (`readable.py`).

A finding names its kind only: the matched text is never kept, logged or returned.

Every pattern runs in time linear in its input, and the text is read in segments (whole lines up
to `SEGMENT_CHARS`, a longer line in overlapping windows), so no one call holds the interpreter
long. The check has a budget: a prompt over `[router] precheck_max_chars`, or one not read
within `precheck_timeout_s`, is treated as private ("unchecked: …"). A long prompt is read in a
worker thread, so the event loop goes on serving everyone else meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .conversation import Conversation
from .personal import personal_data_in
from .scoring import Needs
from .secrets import secrets_in

#: What the scanners read at once: whole lines up to this many characters, or a window of one
#: longer line; the next window of that line overlaps it by more than any credential's length.
SEGMENT_CHARS = 65_536
OVERLAP_CHARS = 1_024
#: Prompts longer than this are checked in a worker thread rather than on the event loop.
INLINE_CHARS = 16_384
#: Characters per token in the input estimate (English runs near 4, code near 3), and tokens a
#: message costs besides its text.
CHARS_PER_TOKEN = 3
TOKENS_PER_MESSAGE = 4


@dataclass(frozen=True)
class PreCheck:
    needs: Needs
    #: Kinds of private data found ("secret: AWS Access Key", "personal: e-mail address"), each once.
    findings: tuple[str, ...]


def input_tokens(conversation: Conversation) -> int:
    """An estimate that errs high for English and code (a context check should not pass a request
    the model would refuse); it errs low for scripts such as Chinese, a token a character or so."""
    chars = sum(len(text) for text in conversation.texts) + conversation.opaque_chars
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(conversation.turns) + 1)


@dataclass(frozen=True)
class Budget:
    """`[router] precheck_max_chars` and `precheck_timeout_s`."""

    max_chars: int
    seconds: float


def segments(text: str, size: int = SEGMENT_CHARS, overlap: int = OVERLAP_CHARS) -> Iterator[str]:
    """`text` as whole lines gathered up to `size` characters; a longer line as windows of `size`,
    each overlapping the one before by `overlap`."""
    start = 0
    while len(text) - start > size:
        cut = text.rfind("\n", start, start + size)
        if cut > start:
            yield text[start:cut]
            start = cut + 1
        else:
            yield text[start:start + size]
            start += size - overlap
    yield text[start:]


def findings_in(text: str, regions: Iterable[str], budget: Budget | None = None) -> set[str]:
    """What the text holds, segment by segment; "unchecked: …" when the budget ran out first
    (no budget: the whole text is read)."""
    if budget is not None and len(text) > budget.max_chars:
        return {f"unchecked: {len(text)} characters, over the pre-check's limit of {budget.max_chars}"}
    seconds = math.inf if budget is None else budget.seconds
    deadline = time.monotonic() + seconds
    found: set[str] = set()
    for segment in segments(text):
        if time.monotonic() >= deadline:
            return found | {f"unchecked: not read within {seconds:g} s"}
        found |= {f"secret: {kind}" for kind in secrets_in(segment)}
        found |= {f"personal: {kind}" for kind in personal_data_in(segment, regions)}
    return found


def precheck(conversation: Conversation, regions: Iterable[str] = (), budget: Budget | None = None) -> PreCheck:
    findings = sorted(findings_in("\n".join(conversation.readable), regions, budget))
    needs = Needs(input_tokens=input_tokens(conversation), tools=conversation.tools, vision=conversation.images,
                  private=bool(findings), api=conversation.api)
    return PreCheck(needs, tuple(findings))


async def checked(conversation: Conversation, regions: Iterable[str], budget: Budget) -> PreCheck:
    """`precheck`, in a worker thread when the prompt is long."""
    if sum(len(text) for text in conversation.readable) <= INLINE_CHARS:
        return precheck(conversation, regions, budget)
    return await asyncio.to_thread(precheck, conversation, tuple(regions), budget)
