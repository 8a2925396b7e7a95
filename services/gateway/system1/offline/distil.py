"""Teacher labels, for `system1 learn --teacher PROVIDER --pool FILE ...` (distillation).

A stronger engine (the stack's llama judge, say) is asked, by name and alone, about rows no one
labelled; where it is sure (decided at the threshold, calibrated as always) its answer becomes
the row's label, and the row trains the fast heads beside the human-labelled ones. The teacher
is also asked the human-labelled rows, so the report can say how often it agrees with people.
Heads are still judged on human labels only (see `learning.py`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from ..client.service_client import ServiceClient
from ..core.heads import kind_of
from .calibrate import Labelled, progress_bar


@dataclass
class Taught:
    provider: str
    #: Pool rows the teacher was sure of, labelled with its answer.
    rows: list[Labelled] = field(default_factory=list)
    asked: int = 0
    unsure: int = 0
    problems: list[str] = field(default_factory=list)
    #: Per kind: (teacher answers that match the human label, teacher answers) on human rows.
    agreement: dict[str, tuple[int, int]] = field(default_factory=dict)

    def agreement_of(self, kind: str) -> str:
        agreed, answered = self.agreement.get(kind, (0, 0))
        return f"{agreed}/{answered} ({agreed / answered:.0%})" if answered else "-"


def kind_of_row(row: Labelled) -> str:
    return kind_of(row.question, row.choices, row.kind, not row.options)


async def _ask(service: ServiceClient, provider: str, row: Labelled, threshold: float) -> tuple[str | None, str | None]:
    """The teacher's sure answer to `row`, or None, and an error message if it failed."""
    reply = await service.decide({**row.request(), "min_confidence": threshold}, client="learn", batch=True,
                                 provider=provider)
    body = reply.envelope
    if body.get("error"):
        return None, body["error"]["message"]
    return (body.get("decision") if body.get("status") == "decided" else None), None


async def teach(service: ServiceClient, provider: str, pool: list[Labelled], human: list[Labelled],
                threshold: float, progress: bool) -> Taught:
    """Label `pool` with `provider`'s sure answers at `threshold`, and measure its agreement
    with the labels of `human`."""
    taught = Taught(provider)
    total = len(pool) + len(human)
    for index, row in enumerate(pool, 1):
        answer, problem = await _ask(service, provider, row, threshold)
        taught.asked += 1
        if problem:
            taught.problems.append(f"pool row {index}: {problem}")
        elif answer is None:
            taught.unsure += 1
        else:
            taught.rows.append(replace(row, label=answer))
        if progress:
            progress_bar(index, total, f"asking {provider}")
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for index, row in enumerate(human, len(pool) + 1):
        answer, problem = await _ask(service, provider, row, threshold)
        if answer is not None and problem is None:
            counts = tally[kind_of_row(row)]
            counts[0] += answer == row.label
            counts[1] += 1
        if progress:
            progress_bar(index, total, f"asking {provider}")
    taught.agreement = {kind: (agreed, answered) for kind, (agreed, answered) in tally.items()}
    return taught
