"""How many threads one engine pass may use: set before NumPy (or torch) loads its BLAS.

The server runs one pass at a time, so a pass may use every CPU the process may run on. Left
alone, OpenBLAS starts a thread per CPU of the *host*, which inside a container limited to two
CPUs means dozens of threads fighting over two cores (a 32-state batch took 7 s instead of
0.3 s). So the count comes from the CPU affinity and the cgroup's CPU quota, or from
`SYSTEMONE_THREADS`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus(cgroup: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """CPUs this process may use: its affinity, capped by a cgroup v2 CPU quota."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = cgroup.read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def configure_threads(requested: str | None = None) -> int:
    """Set the BLAS thread variables (unless the operator did) and return the count."""
    threads = int(requested) if requested and requested.isdigit() and int(requested) > 0 else available_cpus()
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, str(threads))
    return threads
