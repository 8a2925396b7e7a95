"""`system1 calibrate DATA.jsonl ...`: ask labelled decisions live, fit temperatures, report.

Each row is `{"question", "options"?, "context"?, "label", "kind"?}` (other keys, such as `meta`, are
kept out of the request). Every row is asked through the gateway service as batch work with
calibration off, so the fit sees the engine's own probabilities; each question with a context
is also asked once about the context's content-free version, and the fits are made with and
without the content-free correction, keeping the one that predicts questions left out better
(lower log-loss). The report gives accuracy,
ECE and Brier before and after the fit, both in-sample and on held-out folds, AUROC, and the
threshold table with the threshold that reaches `--target-accuracy`. Nothing is written unless
`--write` (this installation's fits, then the service reloads them) or `--ship` (the shipped
fits in the repository, with the report and diagram under `calibration/reports/`).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..core.calibration import Fit, FitsFile, content_free
from ..core.config import GatewaySettings
from ..core.schema import KIND_PATTERN, YES_NO
from ..client.service_client import ServiceClient
from ..hook.log import pool_rows
from .fitting import (
    Answered,
    calibrated,
    cross_validated,
    fit,
    log_loss,
    measure,
    question_held_out,
    question_weighted_ece,
    recommend,
    top,
)



def _repository_reports() -> Path | None:
    """`calibration/reports` of the repository clone this package runs from (an editable
    install); None where the package is installed on its own (there is nothing to ship into)."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "calibration").is_dir():
            return folder / "calibration" / "reports"
    return None


REPORTS = _repository_reports()


# The threshold a request gets unless it names one.
DEFAULT_THRESHOLD = GatewaySettings.model_fields["min_confidence"].default


class DataError(ValueError):
    """A labelled file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Labelled:
    question: str
    options: list[str] | None
    context: dict[str, Any] | None
    label: str
    kind: str | None = None
    #: The group it was written in (`meta.group`, named with its file), for grouped folds.
    group: str | None = None
    #: The judgement it asks, shared by the question's rewordings (`meta.task`; see `Answered.task`).
    task: str | None = None

    @property
    def choices(self) -> list[str]:
        return list(self.options) if self.options else list(YES_NO)

    def request(self, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """The decide request for this row, about `context` (by default its own)."""
        body: dict[str, Any] = {"question": self.question, "min_confidence": 0}
        if self.options:
            body["options"] = self.options
        if self.kind:
            body["kind"] = self.kind
        context = self.context if context is None else context
        if context:
            body["context"] = context
        return body


def row_of(raw: Any, where: str, labelled: bool = True) -> Labelled:
    """One row, checked; `DataError` naming `where` and what is wrong. An unlabelled row (for a
    teacher to label) has the label "" and may not carry one."""
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a row must be a JSON object")
    question, options, context, label = (raw.get(k) for k in ("question", "options", "context", "label"))
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: 'question' must be a non-empty string")
    if options is not None and (not isinstance(options, list) or not all(isinstance(o, str) for o in options)):
        raise DataError(f"{where}: 'options' must be a list of strings")
    if context is not None and not isinstance(context, dict):
        raise DataError(f"{where}: 'context' must be an object")
    if labelled and "label" not in raw:
        raise DataError(f"{where}: the row has no 'label'")
    if not labelled:
        if "label" in raw:
            raise DataError(f"{where}: a pool row is unlabelled: it may not have a 'label'")
        label = ""
    kind = raw.get("kind")
    if kind is not None and (not isinstance(kind, str) or not re.fullmatch(KIND_PATTERN, kind)):
        raise DataError(f"{where}: 'kind' must be a string of letters, digits, '.', '_', '-' or '/'")
    meta = raw.get("meta")
    group = meta.get("group") if isinstance(meta, dict) else None
    task = meta.get("task") if isinstance(meta, dict) else None
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise DataError(f"{where}: 'meta.task' must be a non-empty string")
    row = Labelled(question, options, context, label, kind, group if isinstance(group, str) and group else None, task)
    if labelled and (not isinstance(label, str) or label not in row.choices):
        raise DataError(f"{where}: label {label!r} is not among the options {row.choices}")
    return row


def parse_rows(raws: list[Any], source: str, labelled: bool = True) -> list[Labelled]:
    """Rows that came as JSON values (the label store's), checked like a file's."""
    return [row_of(raw, f"{source} row {number}", labelled) for number, raw in enumerate(raws, 1)]


def load(path: Path, labelled: bool = True) -> list[Labelled]:
    """Labelled rows (or, `labelled` False, unlabelled ones) from a JSONL file (`-` for standard
    input). A line of the router's shadow log (`"shadow"` in it) stands for the rows it holds:
    none where its prompt was not logged. As a pool, a line of the hook's routing log stands for
    the features of its prompt that no one labelled."""
    try:
        lines = (sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")).splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    rows: list[Labelled] = []
    shadowed = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if isinstance(raw, dict) and "shadow" in raw:
            shadowed += 1
            # As a pool, a shadow line's rows lose the labels the decision engine gave them.
            rows += [row_of(row if labelled or not isinstance(row, dict) else
                            {k: v for k, v in row.items() if k != "label"}, f"{path}:{number} row {index}", labelled)
                     for index, row in enumerate(raw.get("rows") or [], 1)]
        elif not labelled and isinstance(raw, dict) and "question" not in raw and isinstance(raw.get("source"), str):
            # A routing log's line, as a pool: the features of its prompt no one labelled.
            rows += [row_of(row, f"{path}:{number} feature {index}", False)
                     for index, row in enumerate(pool_rows(raw), 1)]
        else:
            rows.append(row_of(raw, f"{path}:{number}", labelled))
    rows = [replace(row, group=f"{path.name}:{row.group}") if row.group else row for row in rows]
    if not rows:
        hint = (" (a shadow log holds rows only where [router] log_prompts was on and the prompt was not private)"
                if shadowed else "")
        raise DataError(f"{path}: no {'labelled ' if labelled else ''}rows{hint}")
    return rows


# -- progress and asking --------------------------------------------------------------------------
def progress_bar(done: int, total: int, what: str) -> None:
    """A one-line bar on standard error, ended when `done` reaches `total`."""
    filled = int(30 * done / total)
    end = "\n" if done == total else ""
    print(f"\r{what} [{'#' * filled}{' ' * (30 - filled)}] {done}/{total}", end=end, file=sys.stderr, flush=True)


async def ask_all(service: ServiceClient, rows: list[Labelled], progress: bool) -> tuple[list[Answered], list[str]]:
    """Ask every row through the service (batch priority, calibration off), and each question
    with a context once more about its content-free version."""
    answered, problems = [], []
    baselines: dict[str, dict[str, Any] | None] = {}
    for index, row in enumerate(rows, 1):
        reply = await service.decide(row.request(), client="calibrate", batch=True, calibrate=False)
        body = reply.envelope
        if body.get("error") or not body.get("probabilities"):
            reason = body["error"]["message"] if body.get("error") else "no probabilities (this engine cannot be calibrated)"
            problems.append(f"row {index}: {reason}")
        else:
            model = reply.model or body["provider"]
            baseline = None
            if row.context:
                blank = content_free(row.context)
                key = json.dumps([row.question, row.choices, blank], sort_keys=True)
                if key not in baselines:
                    probe = await service.decide(row.request(blank), client="calibrate", batch=True, calibrate=False)
                    same_engine = (probe.envelope.get("provider"), probe.model) == (body["provider"], reply.model)
                    baselines[key] = probe.envelope.get("probabilities") if same_engine else None
                baseline = baselines[key]
            answered.append(Answered(row.question, tuple(row.choices), row.label, body["probabilities"],
                                     body["provider"], model, baseline, row.task))
        if progress:
            progress_bar(index, len(rows), "asking")
    return answered, problems


# -- answers kept for a later fit ----------------------------------------------------------------
def save_answers(path: Path, rows: list[Answered], sources: list[str]) -> None:
    """`rows` as JSON lines after a line naming their `sources`, so a later `calibrate --answers`
    fits them without asking again (an engine's answers to a seed set can take an hour to ask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"sources": sources}) + "\n")
        for row in rows:
            out.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")


def _probabilities(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0 for p in value.values())


def load_answers(path: Path) -> tuple[list[str], list[Answered]]:
    """The sources and answers `save_answers` wrote; `DataError` naming the line and the field
    that is wrong."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    rows, sources = [], [str(path)]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{where}: not JSON ({exc.msg})") from exc
        if not isinstance(raw, dict):
            raise DataError(f"{where}: an answer must be a JSON object")
        if number == 1 and set(raw) == {"sources"}:
            if not isinstance(raw["sources"], list) or not all(isinstance(s, str) for s in raw["sources"]):
                raise DataError(f"{where}: 'sources' must be a list of strings")
            sources = raw["sources"]
            continue
        for key in ("question", "label", "provider", "model"):
            if not isinstance(raw.get(key), str):
                raise DataError(f"{where}: {key!r} must be a string")
        if raw.get("task") is not None and not isinstance(raw["task"], str):
            raise DataError(f"{where}: 'task' must be null or a string")
        options = raw.get("options")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise DataError(f"{where}: 'options' must be a list of strings")
        if not _probabilities(raw.get("probabilities")):
            raise DataError(f"{where}: 'probabilities' must map options to numbers in [0, 1]")
        if raw.get("baseline") is not None and not _probabilities(raw["baseline"]):
            raise DataError(f"{where}: 'baseline' must be null or map options to numbers in [0, 1]")
        if raw["label"] not in options:
            raise DataError(f"{where}: label {raw['label']!r} is not among the options {options}")
        rows.append(Answered(raw["question"], tuple(options), raw["label"], raw["probabilities"],
                             raw["provider"], raw["model"], raw.get("baseline"), raw.get("task")))
    if not rows:
        raise DataError(f"{path}: no answers")
    return sources, rows


# -- results -------------------------------------------------------------------------------------
def results(rows: list[Answered], target_accuracy: float, k: int) -> tuple[dict[str, Any], dict[str, list[dict[str, float]]]]:
    """The report, and each row's probabilities before, after on held-out rows, and after on
    unseen questions (for the reliability diagram)."""
    # Both families are judged on questions left out; the correction is kept only if it wins.
    modes = (False, True) if any(r.baseline for r in rows) else (False,)
    unseen_by_mode = {mode: question_held_out(rows, mode) for mode in modes}
    loss_by_mode = {mode: log_loss(rows, unseen_by_mode[mode]) for mode in modes}
    content_free = min(modes, key=loss_by_mode.__getitem__)
    fits = fit(rows, content_free=content_free)
    in_sample = calibrated(rows, fits)
    held_out = cross_validated(rows, k, content_free=content_free)
    unseen = unseen_by_mode[content_free]
    raw = [r.probabilities for r in rows]

    def section(indices: list[int]) -> dict[str, Any]:
        subset = [rows[i] for i in indices]
        after_held_out = measure(subset, [held_out[i] for i in indices])
        return {
            "before": measure(subset, [raw[i] for i in indices]),
            "after_in_sample": measure(subset, [in_sample[i] for i in indices]),
            "after_held_out": after_held_out,
            "after_unseen_question": measure(subset, [unseen[i] for i in indices]),
            "recommended": recommend(after_held_out["thresholds"], target_accuracy),
        }

    groups: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[row.question].append(index)
    report = {
        "provider": rows[0].provider,
        "model": rows[0].model,
        "target_accuracy": target_accuracy,
        "folds": k,
        "content_free": content_free,
        "content_free_choice": [{"content_free": mode, "unseen_question_log_loss": loss_by_mode[mode],
                                 "unseen_question_ece": measure(rows, unseen_by_mode[mode])["ece"]} for mode in modes],
        "unseen_question_ece_by_question": {"before": question_weighted_ece(rows, raw),
                                            "after": question_weighted_ece(rows, unseen)},
        "fits": [f.model_dump() for f in fits],
        "overall": section(list(range(len(rows)))),
        "questions": {q: section(ix) for q, ix in groups.items()},
    }
    return report, {"before": raw, "after (held-out rows)": held_out, "after (unseen questions)": unseen}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render(report: dict[str, Any], sources: list[str], problems: list[str]) -> str:
    lines = [
        f"# Calibration report: {report['provider']} {report['model']}", "",
        f"Data: {', '.join(sources)}. Fitted by `system1 calibrate`; \"held-out\" figures come from "
        f"{report['folds']}-fold cross-validation (fitted on the other folds), \"in-sample\" ones from the fit on all rows, "
        "and \"unseen\" ones from fits that never saw any row of the question's task (leave one task out: a question "
        "with the rewordings its rows name as one `meta.task`): what a new "
        "question gets.", "",
        f"| question | n | accuracy before → unseen | ECE before → in-sample → held-out → unseen | unseen at {DEFAULT_THRESHOLD:.2f}: answered / right | "
        "Brier before → held-out | AUROC | temperature | recommended threshold (held-out) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    temperatures = {f["question"]: f["temperature"] for f in report["fits"] if f.get("question")}
    for name, section in [("all rows", report["overall"]), *report["questions"].items()]:
        b, i, h, rec = section["before"], section["after_in_sample"], section["after_held_out"], section["recommended"]
        u = section["after_unseen_question"]
        auroc = "-" if b["auroc"] is None else f"{b['auroc']:.2f}"
        shown = rec and f"{rec['threshold']:.2f}: {_pct(rec['accuracy'])} accurate, {_pct(rec['coverage'])} covered"
        at_default = next(t for t in u["thresholds"] if t["threshold"] == DEFAULT_THRESHOLD)
        lines.append(f"| {name} | {b['n']} | {_pct(b['accuracy'])} → {_pct(u['accuracy'])} | {b['ece']:.3f} → {i['ece']:.3f} → {h['ece']:.3f} → {u['ece']:.3f} | "
                     f"{_pct(at_default['coverage'])} / {_pct(at_default['accuracy'])} | "
                     f"{b['brier']:.3f} → {h['brier']:.3f} | {auroc} | {temperatures.get(name, '-')} | "
                     f"{shown or 'none reaches ' + _pct(report['target_accuracy'])} |")
    overall = report["overall"]
    lines += ["", f"Threshold table, all rows (target accuracy {_pct(report['target_accuracy'])}): coverage and "
              "accuracy on held-out rows, and on unseen questions:", "",
              "| threshold | held-out coverage | held-out accuracy | unseen coverage | unseen accuracy |",
              "|---|---|---|---|---|"]
    lines += [f"| {t['threshold']:.2f} | {_pct(t['coverage'])} | {_pct(t['accuracy'])} | {_pct(u['coverage'])} | "
              f"{_pct(u['accuracy'])} |"
              for t, u in zip(overall["after_held_out"]["thresholds"], overall["after_unseen_question"]["thresholds"])]
    lines += ["", "Content-free correction (dividing out the engine's answer to an empty context), judged on "
              "questions left out: " + "; ".join(
                  f"{'with' if c['content_free'] else 'without'}: log-loss {c['unseen_question_log_loss']:.3f}, "
                  f"ECE {c['unseen_question_ece']:.3f}" for c in report["content_free_choice"])
              + f". Kept: {'with' if report['content_free'] else 'without'}."]
    by_question = report["unseen_question_ece_by_question"]
    lines += ["", f"ECE on unseen questions with every task counted once (not by its rows): "
              f"{by_question['before']:.3f} → {by_question['after']:.3f}."]
    ranges = [f"{f['n_options']}" + (f"–{f['n_options_max']}" if f['n_options_max'] != f['n_options'] else "")
              + f" options: T = {f['temperature']} ({f['questions']} questions, {f['n']} rows)"
              for f in report["fits"] if f.get("n_options")]
    lines += ["", "Option-count ranges (chosen by leaving one task out): "
              + ("; ".join(ranges) if ranges else "none beat one fit for every question") + "."]
    if problems:
        lines += ["", f"{len(problems)} rows were not answered: " + "; ".join(problems[:5])]
    return "\n".join(lines) + "\n"


def merge(path: Path, fits: list[dict[str, Any]]) -> None:
    """Add `fits` to the fits file at `path`: a question's fit replaces that question's, and an
    engine's option-count and unseen-question fits replace all of that engine's (they come from
    the whole run's data, so older ones would contradict them), as they replace every fit of
    that engine made with the other choice of content-free correction."""
    existing = FitsFile.model_validate(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else FitsFile()
    new = [Fit.model_validate(f) for f in fits]
    keys = {f.key for f in new}
    engines = {(f.provider, f.model): f.content_free for f in new if f.kind != "question"}

    def superseded(old: Fit) -> bool:
        engine = (old.provider, old.model)
        return old.key in keys or (engine in engines and (old.kind != "question" or old.content_free != engines[engine]))

    kept = [f for f in existing.fits if not superseded(f)]
    merged = FitsFile(fits=kept + new)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged.model_dump(exclude_none=True), indent=2) + "\n",
                    encoding="utf-8")


def diagram(rows: list[Answered], report_probabilities: dict[str, list[dict[str, float]]], path: Path) -> bool:
    """A reliability diagram (confidence bins against accuracy, before and after); False when
    matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    for label, probabilities in report_probabilities.items():
        bins: dict[int, list[tuple[float, bool]]] = defaultdict(list)
        for row, p in zip(rows, probabilities):
            option, confidence = top(p)
            bins[min(int(confidence * 10), 9)].append((confidence, option == row.label))
        points = sorted((sum(c for c, _ in v) / len(v), sum(ok for _, ok in v) / len(v), len(v)) for v in bins.values())
        ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="o", label=label)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(f"Reliability: {rows[0].provider} {rows[0].model}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
