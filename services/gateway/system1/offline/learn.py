"""`system1 learn DATA.jsonl ...`: ask labelled rows live, fit heads per kind, report.

Each row (the `calibrate` format, plus an optional `kind`) is asked through the gateway service
twice: as a decision with calibration and heads off (the raw engine's answer, which a head must
beat) and at `POST /v1/embed` (the `[learning]` embedder's vector of its judged text, and its
kind). `learning.py` fits and judges; this module asks, renders the report and merges heads
into a heads file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core import lexical
from ..core.heads import Head, HeadsFile
from ..client.service_client import GatewayError, ServiceClient
from .calibrate import Labelled, progress_bar
from .distil import Taught
from .learning import REPEATS, Example, KindResult, learn


async def ask_all(service: ServiceClient, rows: list[Labelled], progress: bool,
                  teacher: bool = False) -> tuple[list[Example], list[str]]:
    """Every row's raw engine answer and embedding (`teacher`: the rows' labels are a teacher's);
    rows that get either wrong are problems."""
    examples, problems = [], []
    for index, row in enumerate(rows, 1):
        request = row.request()
        reply = await service.decide(request, client="learn", batch=True, calibrate=False)
        body = reply.envelope
        try:
            embedded = await service.embed(request, client="learn")
        except GatewayError as exc:
            problems.append(f"row {index}: no embedding: {exc}")
        else:
            if body.get("error") or not body.get("probabilities"):
                reason = body["error"]["message"] if body.get("error") else "the engine gave no probabilities"
                problems.append(f"row {index}: {reason}")
            else:
                examples.append(Example(embedded["kind"], tuple(row.choices), row.label, embedded["embedding"],
                                        body["probabilities"], embedded["embedder"], embedded["model"], teacher,
                                        row.group, lexical.features(request.get("context"))))
        if progress:
            progress_bar(index, len(rows), "asking")
    return examples, problems


def learn_all(examples: list[Example], folds: int, threshold: float, progress: bool, repeats: int = REPEATS) -> list[KindResult]:
    return learn(examples, folds, threshold, (lambda d, t: progress_bar(d, t, "fitting")) if progress else None, repeats)


def by_model(examples: Sequence[Example], results: Sequence[KindResult]) -> list[tuple[Example, list[KindResult]]]:
    """The results grouped by the embedding model their kind's rows were embedded with, each
    group with the first example of that model."""
    firsts: dict[tuple[str, str], Example] = {}
    model_of: dict[str, tuple[str, str]] = {}
    for example in examples:
        key = (example.embedder, example.model)
        firsts.setdefault(key, example)
        model_of.setdefault(example.kind, key)
    groups: dict[tuple[str, str], list[KindResult]] = {}
    for result in results:
        groups.setdefault(model_of[result.kind], []).append(result)
    return [(firsts[key], part) for key, part in groups.items()]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ece(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _head_cell(result: KindResult) -> str:
    """The head's accuracy, and where it was fitted both ways, what it reads and the other's."""
    if not result.head:
        return "-"
    if result.embedding_only is None:
        return _pct(result.head["accuracy"])
    if result.wording:
        return f"{_pct(result.head['accuracy'])} (with wording; embedding alone {_pct(result.embedding_only['accuracy'])})"
    return f"{_pct(result.head['accuracy'])} (embedding alone; wording did not help)"


def _kind_cell(kind: str, width: int = 70) -> str:
    """A kind as a table cell: cut to `width`, its pipes escaped."""
    return (kind if len(kind) <= width else kind[: width - 1] + "…").replace("|", "\\|")


def _ece_cell(engine: float | None, head: dict[str, Any] | None) -> str:
    """`engine → head (range over splits)` for one ECE, or the engine's alone without a head."""
    if not head:
        return _ece(engine)
    spread = head.get("ece_range")
    return f"{_ece(engine)} → {_ece(head['ece'])}" + (f" ({_ece(spread[0])}–{_ece(spread[1])})" if spread else "")


def render(results: Sequence[KindResult], first: Example, sources: list[str], problems: list[str],
           threshold: float, folds: int, repeats: int = REPEATS, taught: Taught | None = None) -> str:
    lines = [
        f"# Learned heads: embedder {first.embedder} {first.model}", "",
        f"Data: {', '.join(sources)}. Fitted by `system1 learn`. Every figure is held out ({folds}-fold, stratified; "
        "where a kind's rows name at least twice that many groups, `meta.group` of their file, each group is held "
        "out whole, and its rows column says how many groups): each row is judged by a head and a temperature fitted on the other folds. The split is drawn "
        f"{repeats} times with different seeds; a head's figures are the means over those splits, each ECE with "
        "its range (one split's ECE on a hundred-odd rows moves by a few hundredths with the split alone). "
        "A head is enabled only if its held-out accuracy beats the raw engine's on the same rows. ECE uses ten "
        f"equal-width bins, over every row and over the rows answered at {threshold:.2f}. Each kind is fitted on "
        "the embedding alone and on the embedding and the wording (`core/lexical.py`) on the same splits; the "
        "head reads the wording only where that lowers the held-out Brier score by more than twice its standard "
        "error.", "",
        f"| kind | rows | options | engine accuracy | head accuracy | coverage / accuracy at {threshold:.2f} "
        f"(engine → head) | ECE, every row: engine → head | ECE, rows answered at {threshold:.2f} | enabled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if not r.rows:
            continue  # teacher rows alone: listed below
        e, h = r.engine, r.head
        at = (f"{_pct(e['at_threshold']['coverage'])} / {_pct(e['at_threshold']['accuracy'])} → "
              f"{_pct(h['at_threshold']['coverage'])} / {_pct(h['at_threshold']['accuracy'])}" if h else "-")
        answered = _ece_cell(e["at_threshold"]["ece"], h["at_threshold"] if h else None)
        kind = _kind_cell(r.kind)
        rows = f"{r.rows} in {r.groups} groups" if r.groups else str(r.rows)
        lines.append(f"| {kind} | {rows} | {len(r.options)} | {_pct(e['accuracy'])} | "
                     f"{_head_cell(r)} | {at} | {_ece_cell(e['ece'], h)} | {answered} | "
                     f"{'yes' if r.enabled else 'no: ' + (r.why_not or '')} |")
    if taught is not None:
        lines += distillation(results, taught, threshold)
    if problems:
        lines += ["", f"{len(problems)} rows were not used: " + "; ".join(problems[:5])]
    return "\n".join(lines) + "\n"


def keep_other_kinds(text: str, earlier: str, fitted: Sequence[str]) -> str:
    """`text`, a report of the kinds `fitted` (`--kind`), with the heads-table rows of every other
    kind carried over from `earlier`, the report it replaces: a fit of some kinds leaves the other
    kinds' figures standing, as it leaves their heads."""
    redone = {_kind_cell(kind) for kind in fitted}
    earlier_lines, start, end = _heads_table(earlier)
    kept = [line for line in earlier_lines[start:end] if line[2:].split(" | ")[0] not in redone]
    if not kept:
        return text
    lines, _, end = _heads_table(text)
    note = ["", f"Rows of kinds this fit did not redo ({len(kept)}) are the earlier report's, as is the plot."]
    return "\n".join(lines[:end] + kept + note + lines[end:]) + "\n"


def _heads_table(report: str) -> tuple[list[str], int, int]:
    """The report's lines and where its heads table's rows start and end (after its header and
    rule, up to the first line that is no row); an empty range where it has none."""
    lines = report.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("| kind | rows |")), None)
    if header is None:
        return lines, len(lines), len(lines)
    start = header + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("| ")), len(lines))
    return lines, start, end


def distillation(results: Sequence[KindResult], taught: Taught, threshold: float) -> list[str]:
    """The teacher's part: how many pool rows it labelled, how often it agrees with people, and
    each head's held-out figures (on human labels) without and with its rows."""
    lines = ["", f"## Teacher labels from {taught.provider}", "",
             f"{taught.asked} pool rows asked at {threshold:.2f}: {len(taught.rows)} labelled, {taught.unsure} left "
             f"unlabelled (the teacher was unsure){f', {len(taught.problems)} failed' if taught.problems else ''}. "
             "Teacher rows train every fold; every figure is on human-labelled rows only.", "",
             "| kind | human rows | teacher rows | teacher agrees with people | head accuracy without → with | "
             f"coverage / accuracy at {threshold:.2f} without → with | enabled |", "|---|---|---|---|---|---|---|"]
    for r in results:
        if not r.teacher_rows:
            continue
        before, after = r.without_teacher, r.head
        kind = _kind_cell(r.kind)
        if before is None or after is None:
            lines.append(f"| {kind} | {r.rows} | {r.teacher_rows} | {taught.agreement_of(r.kind)} | - | - | "
                         f"no: {r.why_not or ''} |")
            continue
        b, a = before["at_threshold"], after["at_threshold"]
        lines.append(f"| {kind} | {r.rows} | {r.teacher_rows} | {taught.agreement_of(r.kind)} | "
                     f"{_pct(before['accuracy'])} → {_pct(after['accuracy'])} | "
                     f"{_pct(b['coverage'])} / {_pct(b['accuracy'])} → {_pct(a['coverage'])} / {_pct(a['accuracy'])} | "
                     f"{'yes' if r.enabled else 'no: ' + (r.why_not or '')} |")
    return lines


def merge(path: Path, heads: list[Head]) -> None:
    """Add `heads` to the heads file at `path`, each replacing the head for its kind and embedder."""
    existing = HeadsFile.model_validate(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else HeadsFile()
    keys = {(h.kind, h.embedder, h.model) for h in heads}
    kept = [h for h in existing.heads if (h.kind, h.embedder, h.model) not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(HeadsFile(heads=kept + heads).model_dump(exclude_none=True)) + "\n", encoding="utf-8")


def curve_plot(results: Sequence[KindResult], path: Path) -> bool:
    """The learning curves (held-out accuracy against rows per option), one line per kind;
    False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for r in results:
        if r.curve:
            ax.plot([x for x, _ in r.curve], [y for _, y in r.curve], marker="o", label=r.kind[:50])
            ax.axhline(r.engine["accuracy"], linestyle=":", linewidth=1, color=ax.lines[-1].get_color())
    ax.set_xlabel("training rows per option")
    ax.set_ylabel("held-out accuracy (dotted: the raw engine)")
    ax.set_ylim(0, 1)
    ax.set_title("Learning curves")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
