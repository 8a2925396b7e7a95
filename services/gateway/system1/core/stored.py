"""Versioned JSON files the gateway reads at start and reload (calibration fits, learned heads):
a `format` name and a `version`, checked before anything in them is used."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

logger = logging.getLogger(__name__)
F = TypeVar("F", bound="VersionedFile")


class VersionedFile(BaseModel):
    """Subclasses set `FORMAT` and `READABLE` and declare `format` and `version` with defaults."""

    model_config = ConfigDict(extra="allow")
    FORMAT: ClassVar[str]
    READABLE: ClassVar[tuple[int, ...]]

    format: str
    version: int

    @model_validator(mode="after")
    def _known(self) -> VersionedFile:
        if self.format != self.FORMAT:
            raise ValueError(f"format is {self.format!r}, expected {self.FORMAT!r}")
        if self.version not in self.READABLE:
            raise ValueError(f"version {self.version} is not supported (this gateway reads {self.READABLE})")
        return self


#: Files parsed before, by class and path, with the (inode, size, mtime) they had then: a
#: reload re-reads only the files that changed (the shipped heads are megabytes of weights, and
#: SIGHUPs in a row would otherwise parse them once each, holding the event loop every time).
_parsed: dict[tuple[type, Path], tuple[tuple[int, int, int], Any]] = {}


def _parse(cls: type[F], path: Path) -> F:
    stat = path.stat()
    signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    known = _parsed.get((cls, path))
    if known is not None and known[0] == signature:
        return known[1]
    parsed = cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
    _parsed[(cls, path)] = (signature, parsed)
    return parsed


def read_all(cls: type[F], paths: list[tuple[str, Path | None]], what: str) -> tuple[list[tuple[str, Path, F]], list[str]]:
    """Each named file that exists, parsed, in order; and for each that cannot be used, a
    one-line message saying why `what` in it is ignored (also logged)."""
    found, errors = [], []
    for name, path in paths:
        if path is None or not path.exists():
            continue
        try:
            found.append((name, path, _parse(cls, path)))
        except (OSError, ValueError, ValidationError, RecursionError) as exc:
            why = "nested too deeply to read" if isinstance(exc, RecursionError) else exc
            message = f"{path}: {what} ignored: {why}".replace("\n", " ")
            logger.warning("%s", message)
            errors.append(message)
    return found, errors
