"""The optional tools some tests need, each found in one place. A test marked `needs_<tool>` is
skipped, saying why, when its tool is missing (tests/conftest.py); a test that runs the tool
takes its path from here. `make test` installs all of them but Docker, which its stack tier
needs running anyway."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def chromium() -> tuple[str, str] | None:
    """Chromium and its WebDriver (Debian's chromium and chromium-driver), or None."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@functools.cache
def promtool() -> str | None:
    """Prometheus's promtool: the one `make test-unit` unpacks into build/prometheus, else on PATH."""
    built = ROOT / "build" / "prometheus" / "promtool"
    return str(built) if built.exists() else shutil.which("promtool")


@functools.cache
def scikit_learn() -> bool:
    """Whether scikit-learn imports (the `learn` extra, which `make setup` installs)."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def docker() -> bool:
    """Whether a Docker daemon answers `docker info`."""
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@functools.cache
def torch_python() -> Path | None:
    """The Python of the systemone-torch venv (`make contract-envs`), or None."""
    python = ROOT / ".venvs" / "systemone-torch" / "bin" / "python"
    return python if python.exists() else None
