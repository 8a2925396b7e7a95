"""Fixtures shared by every test tier, and the skip of a test whose optional tool is missing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests import tools

#: Each `needs_*` marker (registered in pyproject.toml): its tool's check, and the skip reason
#: when the check finds nothing.
NEEDS: dict[str, tuple[Callable[[], object], str]] = {
    "needs_chromium": (tools.chromium, "chromium not installed: make test-unit installs it"),
    "needs_promtool": (tools.promtool, "promtool not built: make test-unit unpacks it into build/prometheus"),
    "needs_sklearn": (tools.scikit_learn, "scikit-learn not installed: make setup installs it"),
    "needs_docker": (tools.docker, "no Docker daemon answers `docker info`: make test-stack needs one"),
    "needs_torch": (tools.torch_python, "the systemone-torch venv is missing: make contract-envs installs it"),
}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # First, so that a missing tool skips the test before its fixtures try to use the tool.
    for marker, (found, reason) in NEEDS.items():
        if item.get_closest_marker(marker) and not found():
            pytest.skip(reason)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
