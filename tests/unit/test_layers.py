"""The package's folders form layers: a folder imports only from the folders below it, so no
import runs upward and no two folders depend on each other."""

from __future__ import annotations

import ast
from pathlib import Path

import system1

PACKAGE = Path(system1.__file__).parent
#: Each folder (or top module) and what it may import; lower layers first.
ALLOWED: dict[str, set[str]] = {
    "providers": set(),
    "core": {"providers"},
    "client": {"core"},
    "hook": {"core", "providers"},
    "router": {"core", "providers"},
    "offline": {"client", "core", "hook", "providers"},
    "service": {"client", "core", "hook", "providers", "router"},
    "commands": {"client", "core", "hook", "offline", "providers", "router", "service"},
    "cli": {"commands"},
    "__main__": {"cli"},
}


def _imported(parts: tuple[str, ...], source: str) -> set[str]:
    """The `system1` folders that module `parts` (its path in the package) imports, relative
    imports resolved; names from the package root itself (`__version__`) are no folder."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = parts[: len(parts) - node.level]
            target = [*base, *(node.module.split(".") if node.module else [])]
            names = [target] if target else [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("system1."):
            names = [node.module.split(".")[1:]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1:] for a in node.names if a.name.startswith("system1.")]
        else:
            continue
        found.update(name[0] for name in names if name and name[0] in ALLOWED)
    return found


def test_every_folder_imports_only_from_the_layers_below_it() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        own = parts[0]
        assert own in ALLOWED, f"{own}: a new folder: give it a layer in ALLOWED"
        imported = _imported(parts, path.read_text(encoding="utf-8"))
        upward += [f"{'/'.join(parts)}.py imports {target}" for target in imported - ALLOWED[own] - {own}]
    assert upward == []


def test_the_layer_check_resolves_relative_and_absolute_imports() -> None:
    source = "from ..service.app import x\nfrom . import lanes\nimport system1.router.router\nfrom .. import __version__\n"
    assert _imported(("core", "gateway"), source) == {"service", "core", "router"}
