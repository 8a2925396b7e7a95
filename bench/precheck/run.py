"""The router's pre-check on adversarial prompts from 1 KB to 30 MB: its time per character,
which stays flat when every pattern runs in linear time, and what the budget makes of the
largest (a prompt it cannot read in full counts as private).

    python bench/precheck/run.py            # writes results.json and RESULTS.md beside this file

The scan is measured in CPU time, without a budget (`findings_in(text, regions)`), so the figures are the
scanners' own; the last column is what the router answers with the stack's budget.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from system1.core.router_config import RouterSettings
from system1.router.precheck import Budget, findings_in

HERE = Path(__file__).parent
SIZES = [1_000, 32_000, 1_000_000, 30_000_000]

def repeat(piece: str, n: int) -> str:
    return (piece * (n // len(piece) + 1))[:n]


SHAPES = {
    "hex digits": lambda n: repeat("0123456789abcdef", n),
    "one letter": lambda n: "A" * n,
    "dotted": lambda n: repeat("a.", n),
    "schemes": lambda n: repeat("a://", n),
    "prose": lambda n: repeat("The patient was seen on Monday and the build failed again. ", n),
}


def seconds(text: str, budget: Budget | None = None) -> tuple[float, set[str]]:
    """CPU seconds of this process (steady while other work shares the machine) and the findings."""
    started = time.process_time()
    found = findings_in(text, ["US"], budget)
    return time.process_time() - started, found


def main() -> None:
    defaults = RouterSettings()
    budget = Budget(defaults.precheck_max_chars, defaults.precheck_timeout_s)
    seconds("warm up: the detectors load on first use")
    rows = []
    for shape, make in SHAPES.items():
        for size in SIZES:
            text = make(size)
            took, _ = seconds(text)
            _, budgeted = seconds(text, budget)
            row = {"shape": shape, "chars": size, "seconds": round(took, 4), "ns_per_char": round(took * 1e9 / size, 1),
                   "with_the_budget": sorted(budgeted) or ["nothing private"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (HERE / "results.json").write_text(json.dumps({"budget": {"max_chars": budget.max_chars, "seconds": budget.seconds},
                                                   "rows": rows}, indent=2) + "\n")
    lines = ["# The pre-check on adversarial prompts", "",
             "`python bench/precheck/run.py`: CPU time per character of the scan without a budget, and what the",
             f"router answers with the stack's budget ({budget.max_chars:,} characters, {budget.seconds:g} s).", "",
             "| shape | characters | CPU seconds | CPU ns per character | with the budget |", "|---|---|---|---|---|"]
    lines += [f"| {r['shape']} | {r['chars']:,} | {r['seconds']} | {r['ns_per_char']} | {'; '.join(r['with_the_budget'])} |"
              for r in rows]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
