"""The topic question as labelled rows, for `system1 learn --router-topics`: the examples of
`[router.topics]`, and rows of the topic question written for other topics (the shipped
router-seed's) asked again over the configured ones.

A head serves only the option set it was fitted on, so once the topics change, the shipped
topic head stands aside and the raw engine answers until a head is fitted on the new set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol, TypeVar

from ..core.router_config import TOPIC_KIND, RouterSettings
from .signals import TOPIC_QUESTION, decision_state


class Row(Protocol):
    kind: str | None
    label: str
    options: list[str] | None


R = TypeVar("R", bound=Row)


def example_rows(settings: RouterSettings) -> list[dict[str, Any]]:
    """Each topic example as a labelled row of the topic question, in the calibrate format. No
    group: a topic's examples held out whole could never be learned, and one group per example
    would only make the folds of the other rows grouped."""
    options = [settings.topic_text(t) for t in settings.topics]
    return [{"question": TOPIC_QUESTION, "options": options, "kind": TOPIC_KIND, "label": settings.topic_text(name),
             "context": decision_state(example, settings.decision.chars)}
            for name, topic in settings.topics.items() for example in topic.examples]


def topic_named(settings: RouterSettings, label: str) -> str | None:
    """The configured topic a topic row's label names ("name: description" or the name)."""
    name = label.partition(":")[0].strip()
    return name if name in settings.topics else None


def retopic(settings: RouterSettings, rows: list[R]) -> tuple[list[R], int]:
    """The rows with every topic-question row asked over the configured topics (its label
    read by the topic's name), and how many were left out for naming a topic no longer there."""
    options = [settings.topic_text(t) for t in settings.topics]
    kept: list[R] = []
    dropped = 0
    for row in rows:
        if row.kind != TOPIC_KIND:
            kept.append(row)
        elif (name := topic_named(settings, row.label)) is None:
            dropped += 1
        else:
            kept.append(replace(row, options=options, label=settings.topic_text(name)))  # type: ignore[type-var]
    return kept, dropped
