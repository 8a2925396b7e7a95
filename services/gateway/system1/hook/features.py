"""The four routing features: yes/no questions about what a task's text shows.

The question texts are part of the calibration key (fits are per question), so changing one
means refitting it.
"""

from __future__ import annotations

FEATURES: dict[str, str] = {
    "read_only": "Does this task only look something up, check, count or answer, without changing any files?",
    "design": "Does this task ask to design, plan, decide between options, research or define an architecture?",
    "review": "Does this task ask to review or audit existing work?",
    "specified": "Does this task name the exact steps, files or plan item to work on?",
}
