"""Versioned JSON files the gateway reads at start and reload (calibration fits, learned heads):
a `format` name and a `version`, checked before anything in them is used."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import ClassVar, TypeVar

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


def read_all(cls: type[F], paths: list[tuple[str, Path | None]], what: str) -> tuple[list[tuple[str, Path, F]], list[str]]:
    """Each named file that exists, parsed, in order; and for each that cannot be used, a
    one-line message saying why `what` in it is ignored (also logged)."""
    found, errors = [], []
    for name, path in paths:
        if path is None or not path.exists():
            continue
        try:
            found.append((name, path, cls.model_validate(json.loads(path.read_text(encoding="utf-8")))))
        except (OSError, ValueError, ValidationError, RecursionError) as exc:
            why = "nested too deeply to read" if isinstance(exc, RecursionError) else exc
            message = f"{path}: {what} ignored: {why}".replace("\n", " ")
            logger.warning("%s", message)
            errors.append(message)
    return found, errors
