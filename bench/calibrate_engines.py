"""Refits the shipped calibration of the stack's two engines on the seed sets, as they were made.

    .venv/bin/python bench/calibrate_engines.py [minilm] [judge]   (needs make contract-envs; asking
                                                                     the judge took 38 minutes on
                                                                     two idle cores)
    .venv/bin/python bench/calibrate_engines.py --saved [minilm] [judge]   (fits the answers kept
                                                                     by the last run; no engine)

Each engine is served here as the stack serves it, behind a gateway of its own, and
`system1 calibrate --ship` asks it every row of its seed sets, fits, and writes the fits into
core/calibration.json and the report and diagram into calibration/reports/. The seed sets are
those of SEEDS below; each report's "Data" line names those of the run that made it (the judge's
yes-no-questions set came after its shipped fits). MiniLM's have no private question: a head answers it.
The judge's have no routing question (the router asks it only through MiniLM's heads) and no
private one: a head on the judge's reading answers that (bench/privacy/probe.py), and asking
its 2,068 long prompts would more than double the run, so the question's own fit, made on the
judge's answers to 1,608 of them, is left as it is (`merge` keeps a question's fit that a run
does not refit). Each run keeps the engine's answers in build/calibration-answers/, so a change
to the fitting is tried with `--saved` in minutes. No blind row is read.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from benchlib import served_gateway  # noqa: E402
from local_engines import judge_server, minilm  # noqa: E402

ANSWERS = ROOT / "build" / "calibration-answers"
SEEDS = {
    "minilm": ["many-questions", "routing", "tier", "tool-choice", "yes-no"],
    "judge": ["yes-no", "tool-choice", "tier", "many-questions", "command-questions", "yes-no-questions"],
}


def served(stack: ExitStack, engine: str) -> tuple[str, str]:
    """`engine` served in `stack`: the gateway's provider name for it and its `[providers.*]` TOML."""
    if engine == "minilm":
        toml, _ = minilm(stack, Path(stack.enter_context(tempfile.TemporaryDirectory())))
        return "systemone", toml
    url, _ = judge_server(stack)
    return "llama", f'[providers.llama]\nendpoint = "{url}"\nmax_options = 52\n'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engines", nargs="*", choices=sorted(SEEDS), default=sorted(SEEDS))
    parser.add_argument("--saved", action="store_true", help="fit the answers the last run kept, asking nothing")
    args = parser.parse_args()
    for engine in args.engines:
        answers = ANSWERS / f"{engine}.jsonl"
        if args.saved:
            subprocess.run([sys.executable, "-m", "system1", "calibrate", "--answers", str(answers), "--ship"],
                           cwd=ROOT, check=True, timeout=3600)
            continue
        with ExitStack() as stack:
            name, toml = served(stack, engine)
            config = f'[gateway]\nprovider = "{name}"\ntimeout_s = 120.0\n\n[learning]\nenabled = false\n\n{toml}'
            url, _, env = stack.enter_context(served_gateway(config))
            data = [f"calibration/{seed}-seed.jsonl" for seed in SEEDS[engine]]
            subprocess.run([sys.executable, "-m", "system1", "calibrate", *data, "--ship", "--url", url,
                            "--save-answers", str(answers)],
                           env=env, cwd=ROOT, check=True, timeout=4 * 3600)


if __name__ == "__main__":
    main()
