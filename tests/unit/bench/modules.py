"""Benchmark scripts loaded as modules, for the tests of their report logic."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def bench_module(name: str, script: str) -> ModuleType:
    """`bench/<script>` as the module `name`; bench/ goes on the path, since the scripts import
    benchlib and local_engines from there."""
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
