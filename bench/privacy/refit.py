"""Refits both stages of the private question on the seed sets, first stage first.

    .venv/bin/python bench/privacy/refit.py   (needs make contract-envs; on two cores about two
                                                hours and a half, most of it the judge's readings)

Stage 1: `system1 learn calibration/router-seed.jsonl calibration/privacy-seed.jsonl --kind
router-private --ship` against a gateway over serve.py with the e5 embedder (as the stack runs it),
which rewrites the e5 `router-private` head in core/heads.json and its rows of the e5 report.
Stage 2: `probe.py --ship`, whose zone is the rows this first stage leaves unsure (held out), so
the stacked head is fitted to the first stage it will be stacked on. Refitting one stage alone
leaves the other fitted to answers that are no longer given (results-stage1-refit-*.json).
No blind row is read.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import served_gateway  # noqa: E402
from local_engines import minilm  # noqa: E402

#: As the report names them: run from the repository's root.
SEEDS = ["calibration/router-seed.jsonl", "calibration/privacy-seed.jsonl"]


def main() -> None:
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="system1-refit-")))
        provider, _ = minilm(stack, work)
        config = '[gateway]\nprovider = "systemone"\ntimeout_s = 60.0\n\n' + provider
        url, _, env = stack.enter_context(served_gateway(config))
        subprocess.run([sys.executable, "-m", "system1", "learn", *SEEDS, "--kind", "router-private", "--ship",
                        "--url", url], env=env, cwd=ROOT, check=True, timeout=3 * 3600)
    subprocess.run([sys.executable, str(HERE / "probe.py"), "--ship"], check=True, timeout=4 * 3600)


if __name__ == "__main__":
    main()
