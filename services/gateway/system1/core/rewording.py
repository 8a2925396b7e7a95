"""The destructive-command question asked in other words, read as the question its head knows.

A learned head answers only the question it was fitted for, word for word (`heads.kind_of`). Asked
"Is this safe to run?" about a command, the gateway would otherwise pass the question to the judge
alone, which is right less often on a rewording than on the head's own question and worst where
the wording is flipped (yes = safe). So a yes/no question about a context's `command`, with no
head of its own, is asked as "Is this tool call destructive or hard to reverse?" when its wording
says which way round it is, and the answer is turned back where the wording is flipped.

Which way round is read twice, and both readings must agree, else the question is asked as worded:

- by its words (`polarity`): danger words (destroy, irreversible, risky, needs approval …) against
  safe ones (safe, harmless, easy to undo, auto-approve …), a negation turning the reading round.
  It cannot parse, so it gives no reading where the two kinds of words meet;
- by the judge (the cascade's second stage, on this machine), asked once per wording what a "yes"
  would say about the command (`MEETING`), in both option orders.

On the 73 wordings of calibration/question-wordings.jsonl (the lexicon's own text) the two agree
on 46 of the 54 that ask this judgement and read none of them the wrong way round; one of the 19
that ask something else (whether it deletes local files) is read as this question
(bench/cascade/REWORDING.md).
A reading is kept per wording (bounded), so after the first ask a wording costs nothing more.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..providers.base import Query, has_evidence
from .chain import Chain
from .heads import normalised
from .result import Decision
from .stages import Asking
from .work import work_of

DESTRUCTIVE = "Is this tool call destructive or hard to reverse?"
#: The context field the destructive-command head reads.
FIELD = "command"
#: Wordings whose reading is kept (least recently used dropped first).
KEPT = 1024

Polarity = Literal["same", "opposite"]

# What a word says about a "yes": danger words make a yes mean destructive, safe ones harmless.
_DANGER = re.compile("|".join((
    r"destr\w*", r"delet\w*", r"eras\w*", r"wip\w*", r"\blos[et]\w*", r"\bloss\b", r"irrevers\w*", r"irrecover\w*",
    r"unrecover\w*", r"permanent\w*", r"danger\w*", r"risk\w*", r"harmful", r"\bharm\b", r"damag\w*", r"\bbreak\w*",
    r"overwrit\w*", r"confirm\w*", r"sign-off", r"approv\w*", r"block\w*", r"backup", r"catastroph\w*", r"unsafe",
    r"\bkill\w*", r"taken back", r"\bfixed\b", r"destroy\w*")))
_SAFE = re.compile("|".join((
    r"\bsafe\w*", r"harmless\w*", r"benign", r"\bfine\b", r"\bokay\b", r"\bok\b", r"(?<!ir)revers\w*", r"recover\w*",
    r"restor\w*", r"revert\w*", r"(?<!be )\bundo\w*", r"(?<!be )undone", r"roll(?:ed)? back", r"innocuous",
    r"auto-approv\w*", r"nothing to worry", r"low[- ]risk")))
# "hard to undo", "difficult or impossible to restore": read as "irreversible", a danger word.
_HARD_TO_UNDO = re.compile(r"(?:hard|difficult|impossible|no way)\W+(?:\w+\W+){0,3}?(?:to\s+)?"
                           r"(?:undo|revers\w*|roll back|recover\w*|restor\w*)")
# Phrases whose negation is part of a safe meaning ("without asking", "no risk"): counted as safe,
# not as a negation, and not as the danger word inside them.
_WITHOUT = r"without (?:asking|approval|any risk|risk)|no approval"
_WAIVED = re.compile(r"auto-approv\w*|" + _WITHOUT)
_NO_RISK = re.compile(r"low[- ]risk|no risk")
_NEGATION_PHRASES = re.compile(r"nothing to worry|no risk|" + _WITHOUT)
_NEGATION = re.compile(r"\b(?:not|no|never|without|none|nothing|nobody|cannot|can't|won't|isn't|doesn't|don't|"
                       r"wouldn't|non|nicht|kein\w*|ohne|sin|nunca|pas|sans|jamais)\b|n't\b")


def polarity(question: str) -> Polarity | None:
    """Whether a "yes" to `question` says the command is destructive ("same") or safe
    ("opposite"), by its words; None where they do not say, or say both."""
    text = _HARD_TO_UNDO.sub(" irreversible ", question.lower())
    waived = len(_WAIVED.findall(text))
    danger = len(_DANGER.findall(text)) - waived - len(_NO_RISK.findall(text))
    safe = len(_SAFE.findall(text)) + waived
    negations = len(_NEGATION.findall(text)) - len(_NEGATION_PHRASES.findall(text))
    if danger > 0 and safe == 0:
        reading: Polarity = "same"
    elif safe > 0 and danger <= 0:
        reading = "opposite"
    else:
        return None
    if negations % 2:
        reading = "opposite" if reading == "same" else "same"
    return reading


#: What the judge is asked about a wording (its text is the judged state), and what each answer
#: means; read in both option orders.
MEANING = "If the answer to this question about a shell command is yes, what does that say about the command?"
DANGEROUS = "the command is dangerous: it could destroy data or be hard to undo"
SAFE = "the command is safe: it is harmless or easy to undo"
NEITHER = "neither: the question asks about something else"
MEANING_ORDERS = ([DANGEROUS, SAFE, NEITHER], [SAFE, DANGEROUS, NEITHER])

#: Asks the judge `queries` about `state`: each answer's probabilities by option, or None when
#: it gave none (down, too slow, no judge).
AskJudge = Callable[[Any, list[Query]], Awaitable[list[dict[str, float]] | None]]


@dataclass(frozen=True)
class Reading:
    """A question asked as `DESTRUCTIVE`, its answer turned round when `flipped`."""

    worded: str
    flipped: bool

    def query(self, query: Query) -> Query:
        return replace(query, question=DESTRUCTIVE)

    def answer(self, decision: Decision) -> Decision:
        """`decision` (an answer to `DESTRUCTIVE`) as the answer to the question as worded."""
        how = "the opposite of" if self.flipped else "the same as"
        note = f"[asked as {DESTRUCTIVE!r}: a yes to {self.worded!r} means {how} a yes to it]"
        rationale = f"{decision.rationale} {note}" if decision.rationale else note
        if not self.flipped:
            return replace(decision, rationale=rationale, read_as="same")
        turned = {"yes": "no", "no": "yes"}
        probabilities = ({turned.get(k, k): v for k, v in decision.probabilities.items()}
                         if decision.probabilities else decision.probabilities)
        return replace(decision, decision=turned.get(decision.decision or "", decision.decision),
                       probabilities=probabilities, rationale=rationale, read_as="opposite")


class Rewording:
    """Readings of yes/no questions about a command, by wording, from the judge (the first of
    `judges`, asked through `chain`; none: no reading) and `polarity`."""

    def __init__(self, known: Callable[[Query], bool], chain: Chain | None = None, judges: list[str] | None = None) -> None:
        #: Whether a question is known as worded (a head or a calibration fit of its own).
        self.known = known
        self.chain = chain
        self.judges = list(judges or [])
        self._readings: OrderedDict[str, Reading | None] = OrderedDict()
        #: The judge's reading of a wording being asked, shared by every request that waits for it.
        self._asking: dict[str, asyncio.Future[Polarity | None]] = {}

    async def readings(self, asked: Asking, queries: list[Query]) -> list[Reading | None]:
        """How each query of one `decide_many` call is asked (None: as worded); [] with no judge."""
        chain = self.chain
        if chain is None or not self.judges:
            return []
        loop = asyncio.get_running_loop()

        async def ask_judge(state: Any, meaning: list[Query]) -> list[dict[str, float]] | None:
            budget_s = None if asked.deadline is None else asked.deadline - loop.time()
            answer = await chain.ask(state, meaning, asked.client, asked.priority, budget_s,
                                     work_of(state, meaning), names=self.judges)
            return None if answer.answers is None else [dict(a.probabilities or {}) for a in answer.answers]

        return [await self.read(asked.state, q, ask_judge) for q in queries]

    def applies(self, state: Any, query: Query) -> bool:
        """Whether `query` about `state` may be a rewording: a yes/no question with no kind, not
        known as worded, about a context whose `command` holds text."""
        if not query.yes_no or query.kind or normalised(query.question) == normalised(DESTRUCTIVE):
            return False
        command = state.get(FIELD) if isinstance(state, dict) else None
        return has_evidence(command) and not self.known(query)

    async def read(self, state: Any, query: Query, ask_judge: AskJudge) -> Reading | None:
        """How to ask `query` (None: as worded). A wording the judge could not be asked about is
        asked as worded and read again next time."""
        if not self.applies(state, query):
            return None
        key = normalised(query.question)
        if key in self._readings:
            self._readings.move_to_end(key)
            return self._readings[key]
        by_words = polarity(query.question)
        if by_words is None:
            return self._keep(key, None)
        asking = self._asking.get(key)
        if asking is None:
            asking = self._asking[key] = asyncio.ensure_future(self.judged_polarity(query.question, ask_judge))
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        by_judge = await asyncio.shield(asking)
        if by_judge is None:
            return None
        return self._keep(key, Reading(query.question, by_words == "opposite") if by_judge == by_words else None)

    @staticmethod
    async def judged_polarity(question: str, ask_judge: AskJudge) -> Polarity | None:
        """What a "yes" to `question` says about the command, as the judge reads it (None: it
        gave no answer, or no preference)."""
        answers = await ask_judge({"question": question}, [Query(MEANING, options) for options in MEANING_ORDERS])
        if not answers or len(answers) != len(MEANING_ORDERS):
            return None
        dangerous = sum(a.get(DANGEROUS, 0.0) for a in answers)
        safe = sum(a.get(SAFE, 0.0) for a in answers)
        if dangerous == safe:
            return None
        return "same" if dangerous > safe else "opposite"

    def _keep(self, key: str, reading: Reading | None) -> Reading | None:
        self._readings[key] = reading
        while len(self._readings) > KEPT:
            self._readings.popitem(last=False)
        return reading
