"""Calibration: makes `confidence`, and so `min_confidence`, mean what it says.

Two steps, both fitted or chosen by `system1 calibrate`:

- Content-free correction (fits with `content_free: true`). An engine leans towards some
  options whatever the text (a text matcher may favour one option's wording). The engine is
  asked the same question about a content-free context (the context's shape with every text
  emptied, see `content_free`) and each option's probability is divided by its content-free
  one, then renormalised ("calibrate before use", Zhao et al., 2021). It needs no labels and can
  change the winning option; a request without a context has nothing to correct against, so
  such fits do not apply to it.
- Yes shift (yes/no answers only): a number added to the log-odds of "yes" before the
  temperature. An LLM judge leans to "yes" whatever the text while still ranking the texts
  well; the shift, fitted on labels with the temperature (Platt scaling), moves the boundary
  back, so it can change the answer.
- Temperature: probabilities are rescaled as p_i^(1/T) / sum_j p_j^(1/T), which never changes
  the winning option.

A fit names the provider and the model or checkpoint it was fitted for and is
ignored for any other. For one answer the first fit that exists applies, in this order:

1. the question's own fit (`question`), fitted on that question's labelled rows;
2. the option-count fit whose range (`n_options` to `n_options_max`, inclusive) holds the
   answer's option count. An engine's ranges are chosen together by leaving whole questions
   out, and written only where splitting by option count beats one fit for every question;
3. the fit for unseen questions (`unseen: true`), one per engine, fitted on every labelled
   question and judged by leaving one question out.
   Fits 2 and 3 serve new questions, so every question weighs alike in them, however many
   rows it has (`offline/fitting.py`);
4. none: the engine's own probabilities (`calibrated: false`; `[gateway] uncalibrated` says
   whether to answer with them or abstain).

Fits file, format version 4 (written by `system1 calibrate`; versions 1 to 3 are read too: they
have no option-count ranges, so their `n_options` is one count, and versions 1 and 2 have no
unseen-question fit or correction):

    {"format": "system1-calibration", "version": 4,
     "fits": [{"provider": "systemone", "model": "minilm", "question": "...", "temperature": 0.42, "n": 45},
              {"provider": "systemone", "model": "minilm", "n_options": 3, "n_options_max": 12,
               "temperature": 0.6, "n": 69},
              {"provider": "systemone", "model": "minilm", "unseen": true, "temperature": 1.7, "n": 300,
               "content_free": true}]}

Other fields (`n`, measurements, dates) are kept for people and ignored here. Two files are
read: the installation's own (`<install dir>/calibration.json`) and the one shipped in this
package; for each kind of fit the local file wins.
"""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .stored import VersionedFile, read_all

FORMAT = "system1-calibration"
VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
SHIPPED_FITS = Path(__file__).with_name("calibration.json")
LOCAL_FITS_NAME = "calibration.json"



class Fit(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    provider: str
    model: str
    question: str | None = None
    n_options: int | None = Field(default=None, ge=2)
    n_options_max: int | None = None  # the range's last count; files before version 4 give one count
    unseen: bool = False
    temperature: float = Field(gt=0.0)
    content_free: bool = False  # fitted on probabilities after the content-free correction
    #: Added to the log-odds of "yes" in a yes/no answer before the temperature (None: none).
    yes_shift: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_count_by_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("n_options") is not None and data.get("n_options_max") is None:
            return {**data, "n_options_max": data["n_options"]}
        return data

    @model_validator(mode="after")
    def _one_key(self) -> Fit:
        if [self.question is not None, self.n_options is not None, self.unseen].count(True) != 1:
            raise ValueError("a fit has exactly one of 'question', 'n_options' or 'unseen: true'")
        if self.n_options is None and self.n_options_max is not None:
            raise ValueError("'n_options_max' needs 'n_options'")
        if self.n_options is not None and self.n_options_max < self.n_options:
            raise ValueError("'n_options_max' is below 'n_options'")
        return self

    def covers(self, n_options: int) -> bool:
        """Whether this option-count fit's range holds `n_options`."""
        return self.n_options is not None and self.n_options <= n_options <= self.n_options_max

    @property
    def kind(self) -> str:
        """What the fit is for, as answers and metrics name it."""
        return "question" if self.question is not None else "options" if self.n_options is not None else "unseen"

    @property
    def key(self) -> tuple:
        return (self.provider, self.model, self.question, self.n_options, self.n_options_max, self.unseen)

    def apply(self, probabilities: dict[str, float]) -> dict[str, float]:
        """`probabilities` after this fit's yes shift and temperature (the content-free
        correction, where the fit has one, comes first: `correct`)."""
        return temper(shift_yes(probabilities, self.yes_shift or 0.0), self.temperature)


class FitsFile(VersionedFile):
    FORMAT = FORMAT
    READABLE = READABLE_VERSIONS

    format: str = FORMAT
    version: int = VERSION
    fits: list[Fit] = Field(default_factory=list)


def temper(probabilities: dict[str, float], temperature: float) -> dict[str, float]:
    """Rescale with one temperature; zeros stay zero and the order never changes."""
    exponent = 1.0 / temperature
    powered = {option: (p**exponent if p > 0 else 0.0) for option, p in probabilities.items()}
    total = sum(powered.values())
    if total <= 0:
        return dict(probabilities)
    return {option: value / total for option, value in powered.items()}


def shift_yes(probabilities: dict[str, float], shift: float) -> dict[str, float]:
    """A yes/no answer with `shift` added to the log-odds of "yes"; any other answer, or a
    certain one, as it is."""
    if not shift or set(probabilities) != {"yes", "no"} or min(probabilities.values()) <= 0:
        return dict(probabilities)
    weighted = {option: p * math.exp(shift) if option == "yes" else p for option, p in probabilities.items()}
    total = sum(weighted.values())
    return {option: w / total for option, w in weighted.items()}


def content_free(state: Any) -> Any:
    """The content-free version of a context: the same shape with every text emptied and every
    other value dropped (`{"command": "rm -rf /"}` becomes `{"command": ""}`); None without one."""
    if isinstance(state, dict):
        return {key: content_free(value) for key, value in state.items()}
    if isinstance(state, list):
        return []
    return "" if isinstance(state, str) else None


def correct(probabilities: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    """Divide each option's probability by its content-free one and renormalise; zeros stay
    zero, and a baseline that does not cover the options leaves them as they are."""
    if set(baseline) != set(probabilities):
        return dict(probabilities)
    weighted = {option: p / max(baseline[option], 1e-6) for option, p in probabilities.items()}
    total = sum(weighted.values())
    return {option: w / total for option, w in weighted.items()} if total > 0 else dict(probabilities)


class Baselines:
    """The engines' content-free answers, by engine, question, options and context shape: each
    is asked once, and the least recently used are forgotten beyond `size`."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._answers: OrderedDict[tuple, dict[str, float]] = OrderedDict()

    def get(self, key: tuple) -> dict[str, float] | None:
        found = self._answers.get(key)
        if found is not None:
            self._answers.move_to_end(key)
        return found

    def put(self, key: tuple, probabilities: dict[str, float]) -> None:
        self._answers[key] = dict(probabilities)
        self._answers.move_to_end(key)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)


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
        # An engine's option-count ranges are made together, so a source's set replaces another's.
        self._by_count: dict[tuple[str, str], list[Fit]] = {}
        self._unseen: dict[tuple[str, str], Fit] = {}
        for source in reversed(sources):  # earlier sources (local) overwrite later ones
            ranges: dict[tuple[str, str], list[Fit]] = defaultdict(list)
            for fit in source.fits:
                if fit.question is not None:
                    self._by_question[(fit.provider, fit.model, fit.question)] = fit
                elif fit.n_options is not None:
                    ranges[(fit.provider, fit.model)].append(fit)
                else:
                    self._unseen[(fit.provider, fit.model)] = fit
            self._by_count.update(ranges)
        self._questions = {question for _, _, question in self._by_question}

    def has_own_fit(self, question: str) -> bool:
        """Whether some engine has a fit of `question`'s own."""
        return question in self._questions

    @classmethod
    def load(cls, local: Path | None, shipped: Path = SHIPPED_FITS) -> Calibrator:
        files, errors = read_all(FitsFile, [("local", local), ("shipped", shipped)], "calibration fits")
        return cls([Source(name, path, tuple(parsed.fits)) for name, path, parsed in files], errors)

    def lookup(self, provider: str, model: str, question: str, n_options: int, has_context: bool = True) -> Fit | None:
        """The fit that applies, in the order of the module docstring, or None (also when the
        fit needs the content-free correction and the request has no context to correct)."""
        found = (self._by_question.get((provider, model, question))
                 or next((f for f in self._by_count.get((provider, model), ()) if f.covers(n_options)), None)
                 or self._unseen.get((provider, model)))
        return None if found is None or (found.content_free and not has_context) else found

    def coverage(self, provider: str) -> dict[str, dict[str, Any]]:
        """For each model of `provider` with fits: the questions and option counts that have
        their own, and whether unseen questions are calibrated."""
        models = {key[1] for key in (*self._by_question, *self._by_count, *self._unseen) if key[0] == provider}
        return {
            model: {
                "questions": sorted(q for p, m, q in self._by_question if (p, m) == (provider, model)),
                "option_counts": sorted([f.n_options, f.n_options_max] for f in self._by_count.get((provider, model), ())),
                "unseen_questions": (provider, model) in self._unseen,
                "content_free_correction": any(
                    f.content_free for f in (*self._by_question.values(), *self._unseen.values(),
                                             *(f for fits in self._by_count.values() for f in fits))
                    if (f.provider, f.model) == (provider, model)),
            }
            for model in sorted(models)
        }

    def summary(self) -> list[dict[str, Any]]:
        return [
            {
                "source": source.name,
                "path": str(source.path),
                "fits": [
                    {
                        "provider": f.provider,
                        "model": f.model,
                        **({"question": f.question} if f.question is not None
                           else {"n_options": f.n_options, "n_options_max": f.n_options_max} if f.n_options is not None
                           else {"unseen": True}),
                        "temperature": f.temperature,
                        "content_free": f.content_free,
                    }
                    for f in source.fits
                ],
            }
            for source in self.sources
        ]
