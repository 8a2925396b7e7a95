"""Temperature calibration: makes `confidence`, and so `min_confidence`, mean what it says.

One temperature per (provider, model, question), falling back to one per (provider, model,
option count). Probabilities are rescaled as p_i^(1/T) / sum_j p_j^(1/T): monotonic, so the
winning option never changes. A fit names the model or checkpoint it was fitted for and is
ignored for any other.

Fits file, format version 1 (written by `system1 calibrate`):

    {"format": "system1-calibration", "version": 1,
     "fits": [{"provider": "systemone", "model": "minilm", "question": "...",
               "temperature": 0.42, "n": 45},
              {"provider": "systemone", "model": "minilm", "n_options": 2,
               "temperature": 0.6, "n": 69}]}

Each fit has exactly one of `question` or `n_options`; other fields (`n`, measurements,
dates) are kept for people and ignored here. Two files are read: the installation's own
(`<install dir>/calibration.json`) and the one shipped in this package; for each lookup the
local file wins, and a question's own fit wins over an option-count fit.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FORMAT = "system1-calibration"
VERSION = 1
SHIPPED_FITS = Path(__file__).with_name("calibration.json")
LOCAL_FITS_NAME = "calibration.json"

logger = logging.getLogger(__name__)


class Fit(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    provider: str
    model: str
    question: str | None = None
    n_options: int | None = Field(default=None, ge=2)
    temperature: float = Field(gt=0.0)

    @model_validator(mode="after")
    def _one_key(self) -> Fit:
        if (self.question is None) == (self.n_options is None):
            raise ValueError("a fit has exactly one of 'question' or 'n_options'")
        return self


class FitsFile(BaseModel):
    model_config = ConfigDict(extra="allow")

    format: str = FORMAT
    version: int = VERSION
    fits: list[Fit] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known(self) -> FitsFile:
        if self.format != FORMAT:
            raise ValueError(f"format is {self.format!r}, expected {FORMAT!r}")
        if self.version != VERSION:
            raise ValueError(f"version {self.version} is not supported (this gateway reads {VERSION})")
        return self


def temper(probabilities: dict[str, float], temperature: float) -> dict[str, float]:
    """Rescale with one temperature; zeros stay zero and the order never changes."""
    exponent = 1.0 / temperature
    powered = {option: (p**exponent if p > 0 else 0.0) for option, p in probabilities.items()}
    total = sum(powered.values())
    if total <= 0:
        return dict(probabilities)
    return {option: value / total for option, value in powered.items()}


@dataclass(frozen=True)
class Source:
    name: str  # "local", "shipped", or "fitted" for fits held in memory
    path: Path | None
    fits: tuple[Fit, ...]


class Calibrator:
    """Looks up and applies fits from the local and the shipped file."""

    def __init__(self, sources: list[Source], errors: list[str] | None = None) -> None:
        self.sources = sources
        self.errors = errors or []
        self._by_question: dict[tuple[str, str, str], Fit] = {}
        self._by_count: dict[tuple[str, str, int], Fit] = {}
        for source in reversed(sources):  # earlier sources (local) overwrite later ones
            for fit in source.fits:
                if fit.question is not None:
                    self._by_question[(fit.provider, fit.model, fit.question)] = fit
                else:
                    self._by_count[(fit.provider, fit.model, fit.n_options or 0)] = fit

    @classmethod
    def load(cls, local: Path | None, shipped: Path = SHIPPED_FITS) -> Calibrator:
        sources, errors = [], []
        for name, path in (("local", local), ("shipped", shipped)):
            if path is None or not path.exists():
                continue
            try:
                parsed = FitsFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, ValidationError) as exc:
                message = f"{path}: calibration fits ignored: {exc}".replace("\n", " ")
                logger.warning("%s", message)
                errors.append(message)
                continue
            sources.append(Source(name, path, tuple(parsed.fits)))
        return cls(sources, errors)

    def lookup(self, provider: str, model: str, question: str, n_options: int) -> Fit | None:
        return self._by_question.get((provider, model, question)) or self._by_count.get(
            (provider, model, n_options)
        )

    def summary(self) -> list[dict[str, Any]]:
        return [
            {
                "source": source.name,
                "path": str(source.path),
                "fits": [
                    {
                        "provider": f.provider,
                        "model": f.model,
                        **({"question": f.question} if f.question is not None else {"n_options": f.n_options}),
                        "temperature": f.temperature,
                    }
                    for f in source.fits
                ],
            }
            for source in self.sources
        ]
