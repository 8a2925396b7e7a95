"""The refitted-skills overlay: per model and topic, a skill measured from outcomes, laid over
the catalogue's guesses when the router is configured (at start and on every reload).

    {"fitted_at": "…", "prior_strength": 10,
     "skills": {"<model id>": {"<topic>": 0.83, …}, …},
     "evidence": {"<model id>": {"<topic>": 41.5, …}, …}}   # outcomes, shared by topic probability

Models and topics the catalogue no longer has are left out, with a warning; a file that cannot
be read leaves the catalogue as it is and says why.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..core.files import write_whole
from ..core.router_config import RouterSettings

logger = logging.getLogger(__name__)


def skills_path(settings: RouterSettings, learned_dir: Path) -> Path:
    configured = settings.outcomes.skills_file
    return Path(configured).expanduser() if configured else learned_dir / "router" / "skills.json"


def read_skills(path: Path) -> dict[str, dict[str, float]]:
    """The overlay's skills; `ValueError` saying what is wrong with the file."""
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
    checked: dict[str, dict[str, float]] = {}
    for model, topics in skills.items():
        if not isinstance(topics, dict):
            raise ValueError(f"{path}: skills.{model}: must be an object of topic → skill")
        for topic, value in topics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{path}: skills.{model}.{topic}: must be a number between 0 and 1")
        checked[model] = {topic: float(value) for topic, value in topics.items()}
    return checked


def apply_skills(settings: RouterSettings, skills: dict[str, dict[str, float]]) -> RouterSettings:
    """The catalogue with the overlay's skills in place of its guesses."""
    known = {m.id for m in settings.models}
    for model in sorted(set(skills) - known):
        logger.warning("router skills overlay: %s is not in the catalogue; its skills are left out", model)
    models = []
    for entry in settings.models:
        fitted = skills.get(entry.id, {})
        unknown = sorted(set(fitted) - set(settings.topics))
        if unknown:
            logger.warning("router skills overlay: %s: %s not among the topics; left out", entry.id, ", ".join(unknown))
        fitted = {t: v for t, v in fitted.items() if t in settings.topics}
        models.append(entry.model_copy(update={"skills": {**entry.skills, **fitted}}) if fitted else entry)
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
