"""The work budget: what one engine pass may cost, computed before anything is sent.

An engine reads, for every question, the judged text, the question and every option, so the
work of a request is the sum over its questions of those characters (and a batch pass carries
the sum over its requests). A request over `[gateway] max_work` is refused as
`invalid_request` naming the limit; the lane never merges requests past it. This bounds how long
one caller can hold an engine: the default, 100,000 characters, is about two seconds of MiniLM
on one CPU core.
"""

from __future__ import annotations

import json
from typing import Any

from ..providers.base import Query


def state_chars(state: Any) -> int:
    if state in (None, "", {}):
        return 0
    return len(state) if isinstance(state, str) else len(json.dumps(state, ensure_ascii=False))


def work_of(state: Any, queries: list[Query]) -> int:
    """Characters an engine reads to answer `queries` about `state`."""
    judged = state_chars(state)
    return sum(judged + len(q.question) + sum(len(choice) for choice in q.choices) for q in queries)


def over_budget(work: int, budget: int) -> str | None:
    """Why a request of `work` characters is refused, or None."""
    if work <= budget:
        return None
    return (f"request: needs {work:,} characters of engine work, over the budget of {budget:,} "
            "([gateway] max_work): send fewer or shorter options, or less context")
