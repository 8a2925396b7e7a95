"""The router's local pre-check, run before anything leaves the machine: what the request needs
(tools, images, input tokens) and whether it holds secrets or personal data.

- Credentials: Yelp's `detect-secrets` detectors (AWS, GitHub, Slack, Stripe, JWTs, private
  keys, basic-auth URLs, `password = …` keywords and the rest) with the library's own false-
  positive filters. Its entropy detectors are left out: on prose they flag ordinary words.
  A detector reads only the lines that could hold what it looks for, which keeps a long
  prompt's scan short: lines with a token of 20 or more characters (every pattern-based
  detector's shortest match but Artifactory's), a URL with credentials or a key header; lines
  with Artifactory's prefixes for its detector; lines with a keyword stem for the keyword one.
- Personal data: phone numbers found and validated by `phonenumbers` (international form, and
  the national form of the configured regions); US social security numbers, IBANs and payment
  card numbers found by shape and validated by `python-stdnum` (checksums, reserved ranges);
  e-mail addresses; health records: a person identified by a labelled name, date of birth or
  record number, in the same text as a clinical fact (a diagnosis, a medication, a lab value).
  The health-record rule reads English only; elsewhere the decision's private question is the
  only guard.

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
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

import phonenumbers
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.keyword import KeywordDetector
from stdnum import iban, luhn
from stdnum.us import ssn

from .conversation import Conversation
from .scoring import Needs

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
#: Every pattern here runs in time linear in its input: a repeated part starts only where the
#: character before it cannot continue it (so no long run is scanned again from each of its
#: characters), and no two repeats of the same characters stand side by side.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
_DATE = r"(?:\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\d{1,2} [A-Z][a-z]+ \d{4}|[A-Z][a-z]+ \d{1,2},? \d{4})"
#: Who a health record is about: a labelled patient name, a date of birth with its value, or a
#: medical record number.
_HEALTH_SUBJECT = re.compile(
    rf"\b(?i:born(?: on)?|DOB|D\.O\.B\.|date of birth|birth ?date)\s*(?:[:=]\s*)?{_DATE}"
    r"|\b(?i:patient(?: name)?)\s*[:=]\s*[A-Z][a-z]+ [A-Z][a-z]+|\bMRN\s*(?:[:#]\s*)?\d{4,}")
#: What makes it a health record: a clinical fact about that person.
_CLINICAL = re.compile(r"\b(?:diagnos[ie]s|diagnosed|prescri(?:bed|ption)|medication|dosage|admitted|discharged|"
                       r"symptoms?|HbA1c|blood pressure|troponin|insulin|chemotherapy|ICD-10|allerg(?:y|ies|ic))\b",
                       re.IGNORECASE)
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


@cache
def _detectors() -> list[tuple[re.Pattern[str], list[BasePlugin], bool]]:
    """Each group of detectors, the test a line must pass to be read by them, and whether they
    read one line at a time."""
    classes = [cls for cls in get_mapping_from_secret_type_to_class().values() if cls.__name__ not in LEFT_OUT]
    return [(_MAY_HOLD_TOKEN, [cls() for cls in classes if cls not in (KeywordDetector, ArtifactoryDetector)], False),
            (_MAY_HOLD_ARTIFACTORY, [ArtifactoryDetector()], False),
            (_MAY_HOLD_KEYWORD, [KeywordDetector()], True)]


def _kept(secret: str, line: str, plugin: BasePlugin) -> bool:
    """detect-secrets' own filters for a found secret (those that do not need a file)."""
    return not (heuristic.is_sequential_string(secret) or heuristic.is_potential_uuid(secret)
                or heuristic.is_likely_id_string(secret, line, plugin) or heuristic.is_templated_secret(secret)
                or heuristic.is_prefixed_with_dollar_sign(secret) or heuristic.is_not_alphanumeric_string(secret)
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
    if BASIC_AUTH not in found and any(not (heuristic.is_templated_secret(p) or heuristic.is_prefixed_with_dollar_sign(p))
                                       for p in _URL_CREDENTIALS.findall(text)):
        found.add(BASIC_AUTH)
    return found


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


def personal_data_in(text: str, regions: Iterable[str] = ()) -> set[str]:
    """The kinds of personal data in `text`; phone numbers in national form only for `regions`."""
    found = set()
    if "@" in text and _EMAIL.search(text):
        found.add("e-mail address")
    if any(ssn.is_valid(m.group()) for m in _SSN.finditer(text)):
        found.add("US social security number")
    if any(iban.is_valid(m.group()) for m in _IBAN.finditer(text)):
        found.add("IBAN")
    if any(_card(m.group()) for m in _CARD.finditer(text)):
        found.add("payment card number")
    if _HEALTH_SUBJECT.search(text) and _CLINICAL.search(text):
        found.add("health record")
    for region in ((None,) if "+" in text else ()) + tuple(regions):  # no region: "+" numbers only
        if any(True for _ in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID)):
            found.add("phone number")
            break
    return found


def _card(candidate: str) -> bool:
    digits = re.sub(r"[ -]", "", candidate)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn.is_valid(digits)


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
    findings = sorted(findings_in("\n".join(conversation.texts), regions, budget))
    needs = Needs(input_tokens=input_tokens(conversation), tools=conversation.tools, vision=conversation.images,
                  private=bool(findings), api=conversation.api)
    return PreCheck(needs, tuple(findings))


async def checked(conversation: Conversation, regions: Iterable[str], budget: Budget) -> PreCheck:
    """`precheck`, in a worker thread when the prompt is long."""
    if sum(len(text) for text in conversation.texts) <= INLINE_CHARS:
        return precheck(conversation, regions, budget)
    return await asyncio.to_thread(precheck, conversation, tuple(regions), budget)
