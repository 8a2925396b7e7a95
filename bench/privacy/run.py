"""The leak benchmark: which prompts of the blind privacy set would leave the machine under
`[router] private = "local_only"`, which ordinary ones are kept here for nothing, what each stage
caught, and what the check adds to a request's time.

Every prompt of `blind.jsonl` (written apart from every training row, never fitted or tuned on)
goes through the gateway's dry run (`POST /v1/router/route`) of a served `system1 serve` with the
stack's catalogue (deploy/config.toml, every cloud tier configured, `local_only`), over MiniLM
(serve.py) and, where the code has it, the cascade's judge (llama-server with Qwen2.5-Coder-1.5B).
No chat model is called.

- leaked: a private prompt whose route is a model off this machine;
- false alarm: an ordinary prompt treated as private (the route held to local models);
- caught by: the pre-check (a finding), the decision's stage 1 (MiniLM with its head) or stage 2
  (the judge), read from the dry run's `kept_local` and `signals.private_by`;
- time: the pre-check alone (in process, CPU) and the dry run's decision, for prompts stage 1
  cleared and for those passed to the judge.

`--code DIR` serves another checkout's gateway (its `services/gateway`), so the same run measures
an earlier version beside this one: `--code` a worktree of the earlier commit, `--label before`.
Writes results-LABEL.json; `--report` writes RESULTS.md and leaks.png from every results file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, percentile, served_gateway  # noqa: E402
from local_engines import judge_server, serve  # noqa: E402

CLOUD_KEYS = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
#: "judge-generic-fit": this code before the judge had a fit for the private question (it read
#: the judge through its unseen-question fit); "minilm-head": before the router-private head
#: read e5's vectors (it read MiniLM's); "e5-head": that head on e5 before the router's training
#: prompts grew from 156 to 1,216; "seed-927": before the privacy seed grew from 927 to 1,608
#: prompts and the pre-check read `curl -u`, `define(…)`, XML and `.netrc` credentials and let
#: named placeholders (`YOUR_API_KEY`) be; "one-order": before the judge asked a yes/no question
#: in both option orders and its private-question fit was refitted on all 1,608 prompts;
#: "embedding-alone": before the heads read the wording beside the embedding; "judge-answer": before
#: the judge's reading replaced its answer; each kept as measured. "stage1-refit": this code with
#: the e5 head refitted on the privacy seed's 2,068 prompts and the judge's head left as it was,
#: measured and not shipped. "joint-refit": both stages refitted together on those prompts
#: (refit.py), judged by PREREG.md.
LABELS = ("before", "judge-generic-fit", "minilm-head", "e5-head", "seed-927", "one-order", "embedding-alone",
          "judge-answer", "after", "stage1-refit", "joint-refit")


def blind(name: str = "blind.jsonl") -> list[dict]:
    return [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines() if line]


def suffix(name: str) -> str:
    """What a blind set's result files carry after their names ("" for the first set)."""
    return "" if name == "blind.jsonl" else "-" + Path(name).stem


def result_files(name: str) -> dict[str, Path]:
    return {label: path for label in LABELS if (path := HERE / f"results-{label}{suffix(name)}.json").exists()}


def config(code: Path, minilm: str, judge: str | None, private: str = "local_only") -> str:
    """The stack's config, pointed at the engines started here, under `private` (`local_only`)."""
    text = (code / "deploy" / "config.toml").read_text(encoding="utf-8")
    text = text.replace("http://systemone:8790", minilm)
    text = text.replace("http://llama:8080", judge or "http://127.0.0.1:9")  # no judge: nothing answers there
    text = re.sub(r'^private = "[a-z_]+"', f'private = "{private}"', text, count=1, flags=re.M)
    if judge is None:
        text = re.sub(r"^cascade = \[.*\]$", "cascade = []", text, count=1, flags=re.M)
    return text


def precheck_ms(code: Path, prompts: list[str]) -> list[float]:
    """The pre-check's CPU time per prompt, in a process that imports `code`'s gateway."""
    script = (
        "import json, sys, time\n"
        "from system1.router.conversation import from_openai\n"
        "from system1.router.precheck import precheck\n"
        "prompts = json.load(sys.stdin)\n"
        "precheck(from_openai({'model': 'auto', 'messages': [{'role': 'user', 'content': 'warm up'}]}))\n"
        "out = []\n"
        "for p in prompts:\n"
        "    body = {'model': 'auto', 'messages': [{'role': 'user', 'content': p}]}\n"
        "    started = time.process_time()\n"
        "    precheck(from_openai(body))\n"
        "    out.append((time.process_time() - started) * 1000)\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": str(code / "services" / "gateway")}
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(prompts), capture_output=True, text=True,
                          env=env, check=True, timeout=600)
    return json.loads(done.stdout)


def caught_by(report: dict) -> str | None:
    """Which stage kept the prompt here (None: it may leave)."""
    if not report["needs"]["local_only"]:
        return None
    if report["findings"]:
        return "pre-check"
    if "private_by" not in report["signals"]:  # code from before the judge: every decision was stage 1's
        return "stage 1"
    by = report["signals"]["private_by"] or ""
    return "stage 2" if by.startswith("stage 2") else "stage 1" if by else "no decision"


def gateway(stack: ExitStack, code: Path, judge_url: str | None, private: str) -> str:
    """A gateway of `code` under `private`, over a MiniLM process of its own: its URL."""
    port = free_port()
    serve(stack, [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port)],
          f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2", "SYSTEMONE_EMBEDDERS": "e5"})
    keys = {k: "placeholder-for-the-benchmark" for k in CLOUD_KEYS}
    env = {**keys, "PYTHONPATH": str(code / "services" / "gateway")}
    url, _, _ = stack.enter_context(served_gateway(config(code, f"http://127.0.0.1:{port}", judge_url, private), env))
    return url


def dry_run(client: httpx.Client, prompt: str) -> tuple[httpx.Response, float]:
    body = {"model": "auto", "messages": [{"role": "user", "content": prompt}]}
    started = time.perf_counter()
    reply = client.post("/v1/router/route", json=body)
    return reply, (time.perf_counter() - started) * 1000


def run(code: Path, label: str, judge: bool, name: str, paired: bool) -> dict:
    """Every row through the dry run under `local_only`; with `paired`, also through a second
    gateway of the same code under `private = "ignore"` (the router without its privacy rule),
    the two asked in turn, first one then the other, so drift in the machine's speed falls on both:
    the difference per prompt is what `local_only` adds to it."""
    rows = blind(name)
    answers = []
    with ExitStack() as stack:
        def client(private: str) -> httpx.Client:  # engines of its own: no cache serves the other's prompt
            judge_url = judge_server(stack, slots=2)[0] if judge else None
            return stack.enter_context(httpx.Client(base_url=gateway(stack, code, judge_url, private), timeout=120))

        local = client("local_only")
        plain = client("ignore") if paired else None
        for n, row in enumerate(rows):
            if plain is not None and n % 2:
                _, ignore_ms = dry_run(plain, row["prompt"])
            reply, ms = dry_run(local, row["prompt"])
            if plain is not None and not n % 2:
                _, ignore_ms = dry_run(plain, row["prompt"])
            report = reply.json() if reply.status_code == 200 else {}
            kept = reply.status_code == 403 or bool(report.get("needs", {}).get("local_only"))
            answers.append({"id": row["id"], "status": reply.status_code, "model": report.get("model"),
                            "local_only": kept, "caught_by": caught_by(report) if report else "refused",
                            "p_private": (report.get("signals") or {}).get("p_private"),
                            "private_by": (report.get("signals") or {}).get("private_by") or "",
                            "findings": report.get("findings", []), "dry_run_ms": ms,
                            "decision_ms": report.get("decision_ms"),
                            **({"ignore_dry_run_ms": ignore_ms} if plain is not None else {})})
    check = precheck_ms(code, [r["prompt"] for r in rows])
    for answer, ms in zip(answers, check):
        answer["precheck_ms"] = ms
    return {"label": label, "judge": judge, "blind": name, "rows": len(rows), "answers": answers}


def summary(results: dict) -> dict:
    rows = {r["id"]: r for r in blind(results.get("blind", "blind.jsonl"))}
    answers = results["answers"]
    private = [a for a in answers if rows[a["id"]]["private"]]
    ordinary = [a for a in answers if not rows[a["id"]]["private"]]
    hidden = [a for a in private if not rows[a["id"]]["regex_visible"]]
    leaked = [a for a in private if not a["local_only"]]
    alarms = [a for a in ordinary if a["local_only"]]
    # Before the judge answered the router's questions, every decision was stage 1's.
    def by_judge(a: dict) -> bool:
        return a.get("private_by", "").startswith("stage 2")

    def judge_unanswered(a: dict) -> bool:  # the fast stage's answer stood (`signals.private_source`)
        return a.get("private_by", "").endswith("after it)")

    judged = [a for a in answers if by_judge(a)]
    unanswered = [a for a in answers if judge_unanswered(a)]
    cleared = [a for a in answers if a["decision_ms"] is not None and not a["findings"]
               and not by_judge(a) and not judge_unanswered(a)]

    def p(values: list[float], q: float) -> float | None:
        return percentile(values, q) if values else None

    # What local_only added to a cleared prompt: its dry run against the same prompt's under "ignore".
    added = [a["dry_run_ms"] - a["ignore_dry_run_ms"] for a in cleared if "ignore_dry_run_ms" in a]

    return {
        "private": len(private), "ordinary": len(ordinary), "hidden_private": len(hidden),
        "leaked": len(leaked), "leaked_hidden": sum(1 for a in leaked if not rows[a["id"]]["regex_visible"]),
        "leaked_ids": [a["id"] for a in leaked],
        "leaked_by_category": dict(Counter(rows[a["id"]]["category"] for a in leaked)),
        "false_alarms": len(alarms), "false_alarm_share": len(alarms) / len(ordinary),
        "false_alarms_by_category": dict(Counter(rows[a["id"]]["category"] for a in alarms)),
        "caught_by": dict(Counter(a["caught_by"] for a in private if a["local_only"])),
        "alarms_by": dict(Counter(a["caught_by"] for a in alarms)),
        "precheck_p50_ms": p([a["precheck_ms"] for a in answers], 50),
        "precheck_p90_ms": p([a["precheck_ms"] for a in answers], 90),
        "cleared_decision_p50_ms": p([a["decision_ms"] for a in cleared], 50),
        "cleared_decision_p90_ms": p([a["decision_ms"] for a in cleared], 90),
        "added_p50_ms": p(added, 50), "added_p90_ms": p(added, 90), "added_n": len(added),
        "judged": len(judged), "judged_decision_p50_ms": p([a["decision_ms"] for a in judged], 50),
        "judged_decision_p90_ms": p([a["decision_ms"] for a in judged], 90),
        "judge_unanswered": len(unanswered), "judge_let_go": sum(1 for a in judged if not a["local_only"]),
    }


def fmt(value: float | None, unit: str = " ms") -> str:
    return "–" if value is None else f"{value:.1f}{unit}"


def report(name: str) -> str:
    found = {label: json.loads(path.read_text()) for label, path in result_files(name).items()}
    sums = {label: summary(r) for label, r in found.items()}
    rows = {r["id"]: r for r in blind(name)}
    first = next(iter(sums.values()))
    lines = ["# Leaks under `local_only` on the blind privacy set", "",
             f"`make bench-privacy`: {first['private']} private prompts ({first['hidden_private']} of them invisible to a "
             f"pattern) and {first['ordinary']} ordinary ones from `{name}`, written apart from every training row "
             "and never fitted or tuned on, each through the gateway's dry run with the stack's catalogue under "
             "`local_only` (every cloud tier configured). \"before\" is the gateway as it was before the privacy work "
             "(its pre-check and shipped heads, no judge on the router's questions); \"after\" is this code with its "
             "shipped heads and the judge as the cascade's second stage, its private question decided by a head on the "
             "judge's reading stacked on the first stage's answer; "
             "\"judge-generic-fit\" is the same code measured before the judge's answer had a fit of its own for the "
             "private question (its unseen-question fit read the question), \"minilm-head\" before the private question's head read multilingual-e5-small's "
             "vectors (it read MiniLM's), and \"e5-head\" that head on e5 before the router's training prompts grew "
             "from 156 to 1,216, \"seed-927\" before the privacy seed grew from 927 to 1,608 prompts and the pre-check "
             "read `curl -u`, `define(…)`, XML and `.netrc` credentials and let named placeholders be, \"one-order\" "
             "before the judge asked a yes/no question in both option orders and had its private-question fit refitted "
             "on all 1,608 prompts, \"embedding-alone\" before the heads read the prompt's wording beside its "
             "embedding, \"judge-answer\" before the judge's reading replaced its answer to the private question "
             "(a head on its last hidden state, stacked on the first stage's answer), each kept as measured; "
             "\"stage1-refit\" is this code with the first stage's head refitted on the privacy seed's 2,068 prompts "
             "and the judge's head left as it was, measured and not shipped, and \"joint-refit\" both stages refitted "
             "together on them (`refit.py`), judged by the rule in `PREREG.md`. The last column counts the prompts passed to the judge "
             "and, of them, those it let leave. The pre-check's time is CPU time in process; "
             "the decision's is the dry run's own figure. \"Added by local_only\" is, for each prompt stage 1 "
             "cleared, its dry run's time (client side: pre-check, decision, reply) less the same prompt's through "
             "a second gateway of the same code under `private = \"ignore\"`, over engines of its own, the two asked "
             "in turn (`--paired`; – where not measured). The router asks its four questions in every mode, so "
             "this is what the privacy rule adds, not what the decision costs.", "",
             "| | private prompts that leave | of them invisible to a pattern | false alarms (ordinary kept here) "
             "| caught: pre-check / stage 1 / stage 2 / no decision | pre-check p50 / p90 | decision p50 / p90, "
             "stage 1 cleared | added by local_only p50 / p90, stage 1 cleared | decision p50 / p90, passed to the "
             "judge (passed; let leave) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, s in sums.items():
        caught = s["caught_by"]
        lines.append(
            f"| {label} | {s['leaked']} of {s['private']} | {s['leaked_hidden']} of {s['hidden_private']} | "
            f"{s['false_alarms']} of {s['ordinary']} ({100 * s['false_alarm_share']:.0f} %) | "
            f"{caught.get('pre-check', 0)} / {caught.get('stage 1', 0)} / {caught.get('stage 2', 0)} / "
            f"{caught.get('no decision', 0)} | {fmt(s['precheck_p50_ms'])} / {fmt(s['precheck_p90_ms'])} | "
            f"{fmt(s['cleared_decision_p50_ms'])} / {fmt(s['cleared_decision_p90_ms'])} | "
            f"{fmt(s.get('added_p50_ms'))} / {fmt(s.get('added_p90_ms'))} | "
            f"{fmt(s['judged_decision_p50_ms'])} / {fmt(s['judged_decision_p90_ms'])} "
            f"({s['judged']}; {s['judge_let_go']}) |")
    for label, s in sums.items():
        lines += ["", f"## {label}: what leaked, what was kept for nothing", "",
                  f"- leaked, by category: {s['leaked_by_category'] or 'none'}",
                  f"- false alarms, by category: {s['false_alarms_by_category'] or 'none'}; by rule: {s['alarms_by']}",
                  f"- passed to the judge and not answered by it (a timeout, an error, an open circuit), so the "
                  f"fast stage's answer stood: {s['judge_unanswered']}",
                  "- leaked prompts: " + ("; ".join(f"{i} ({rows[i]['category']}, {rows[i]['lang']}): "
                                                     f"{rows[i]['note']}" for i in s["leaked_ids"]) or "none")]
    return "\n".join(lines) + "\n"


def plot(name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sums = {label: summary(json.loads(path.read_text())) for label, path in result_files(name).items()}
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    names = list(sums)
    axes[0].bar(names, [s["leaked"] / s["private"] * 100 for s in sums.values()], color="#c0392b")
    axes[0].set_title("private prompts that leave (%)")
    axes[1].bar(names, [s["false_alarm_share"] * 100 for s in sums.values()], color="#2980b9")
    axes[1].axhline(10, color="grey", linestyle="--", linewidth=1)
    axes[1].set_title("ordinary prompts kept here (%)")
    for ax in axes:
        ax.set_ylim(0, 100)
    fig.suptitle(f"local_only on the blind privacy set ({name})")
    fig.tight_layout()
    fig.savefig(HERE / f"leaks{suffix(name)}.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose gateway is served")
    parser.add_argument("--label", choices=LABELS, default="after")
    parser.add_argument("--no-judge", action="store_true", help="serve no judge (the code has no cascade)")
    parser.add_argument("--paired", action="store_true", help="also time each prompt through the same code under "
                        "private = \"ignore\", for what local_only adds")
    parser.add_argument("--report", action="store_true", help="only write RESULTS.md and leaks.png")
    parser.add_argument("--blind", default="blind.jsonl", help="the blind set beside this file (blind2.jsonl, "
                        "blind3.jsonl: written after the first was measured); result files carry its name")
    args = parser.parse_args()
    if not args.report:
        results = run(args.code.resolve(), args.label, not args.no_judge, args.blind, args.paired)
        (HERE / f"results-{args.label}{suffix(args.blind)}.json").write_text(json.dumps(results, indent=1) + "\n")
        print(json.dumps(summary(results), indent=1))
    (HERE / f"RESULTS{suffix(args.blind)}.md").write_text(report(args.blind))
    plot(args.blind)


if __name__ == "__main__":
    main()
