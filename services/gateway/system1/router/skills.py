"""The refitted-skills overlay: per model and topic, a skill measured from outcomes, and per
model, topic and complexity level a chance of a good answer, laid over the catalogue's guesses
when the router is configured (at start and on every reload).

    {"fitted_at": "…", "prior_strength": 10,
     "skills": {"<model id>": {"<topic>": 0.83, …}, …},
     "evidence": {"<model id>": {"<topic>": 41.5, …}, …},   # outcomes, shared by topic probability
     "success": {"<model id>": {"<topic>": {"2": 0.71, …}, …}, …},
     "success_evidence": {…}}                               # the same, by level

Models and topics the catalogue no longer has are left out, with a warning; a file that cannot
be read leaves the catalogue as it is and says why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.files import write_whole
from ..core.router_config import COMPLEXITY_LEVELS, RouterSettings

logger = logging.getLogger(__name__)


def skills_path(settings: RouterSettings, learned_dir: Path) -> Path:
    configured = settings.outcomes.skills_file
    return Path(configured).expanduser() if configured else learned_dir / "router" / "skills.json"


@dataclass(frozen=True)
class Overlay:
    skills: dict[str, dict[str, float]]
    #: Model → topic → complexity level → chance of a good answer.
    success: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)


#: The complexity levels as the overlay's JSON keys them.
LEVEL_NAMES = tuple(str(level) for level in range(COMPLEXITY_LEVELS))


def _share(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{where}: must be a number between 0 and 1")
    return float(value)


def _levels(path: Path, model: str, topic: str, levels: Any) -> dict[int, float]:
    where = f"{path}: success.{model}.{topic}"
    if not isinstance(levels, dict) or not all(isinstance(k, str) and k in LEVEL_NAMES for k in levels):
        raise ValueError(f"{where}: must be an object of complexity level ({', '.join(LEVEL_NAMES)}) → chance")
    return {int(level): _share(value, f"{where}.{level}") for level, value in levels.items()}


def read_skills(path: Path) -> Overlay:
    """The overlay's skills and chances of success; `ValueError` saying what is wrong with the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to read") from None
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict):
        raise ValueError(f"{path}: has no \"skills\" object")
    success = data.get("success", {})
    for name, table in (("skills", skills), ("success", success)):
        if not isinstance(table, dict) or not all(isinstance(topics, dict) for topics in table.values()):
            raise ValueError(f"{path}: {name}: must be an object of model → topic → value")
    return Overlay(
        {model: {topic: _share(v, f"{path}: skills.{model}.{topic}") for topic, v in topics.items()}
         for model, topics in skills.items()},
        {model: {topic: _levels(path, model, topic, levels) for topic, levels in topics.items()}
         for model, topics in success.items()})


def apply_skills(settings: RouterSettings, overlay: Overlay) -> RouterSettings:
    """The catalogue with the overlay's skills and chances of success in place of its guesses."""
    known = {m.id for m in settings.models}
    for model in sorted((set(overlay.skills) | set(overlay.success)) - known):
        logger.warning("router skills overlay: %s is not in the catalogue; its skills are left out", model)
    models = []
    for entry in settings.models:
        fitted, levels = overlay.skills.get(entry.id, {}), overlay.success.get(entry.id, {})
        unknown = sorted((set(fitted) | set(levels)) - set(settings.topics))
        if unknown:
            logger.warning("router skills overlay: %s: %s not among the topics; left out", entry.id, ", ".join(unknown))
        update = {"skills": {**entry.skills, **{t: v for t, v in fitted.items() if t in settings.topics}},
                  "success": {**entry.success, **{t: {**entry.success.get(t, {}), **v} for t, v in levels.items()
                                                  if t in settings.topics}}}
        models.append(entry.model_copy(update=update) if fitted or levels else entry)
    return settings.model_copy(update={"models": models})


def load_overlay(settings: RouterSettings, learned_dir: Path) -> tuple[RouterSettings, str | None]:
    """The settings with the overlay applied where there is one; a broken one is skipped, and
    what is wrong with it said (and logged)."""
    path = skills_path(settings, learned_dir)
    if not settings.enabled or not path.exists():
        return settings, None
    try:
        return apply_skills(settings, read_skills(path)), None
    except ValueError as exc:
        logger.error("router skills overlay skipped, the catalogue's skills stand: %s", exc)
        return settings, f"{exc} (the router skills overlay is ignored)"


def write_skills(path: Path, document: dict[str, Any]) -> None:
    write_whole(path, json.dumps(document, indent=2, sort_keys=True) + "\n")
