"""Personal data in text, for the router's pre-check.

- Identifiers: phone numbers found and validated by `phonenumbers` (international form, and the
  national form of the configured regions); US social security numbers, IBANs and payment card
  numbers found by shape and validated by `python-stdnum` (checksums, reserved ranges); e-mail
  addresses, but for those at domains reserved for examples and tests (RFC 2606 and 6761:
  `user@example.com`, `a@b.test`), which no one can hold, so they are placeholders.
- Health records: a person identified by a labelled name, date of birth or record number, in the
  same text as a clinical fact (a diagnosis, a medication, a lab value).
- A named person next to a sensitive fact about them: a name (two capitalised words that are no
  common phrase, a capitalised name after a word for a colleague or relative, or in the
  possessive) in the same
  sentence as their pay, health, performance review, discipline, legal matter, family matter or
  immigration status. The words are English, German, French, Spanish, Italian, Portuguese and
  Dutch; names in scripts without capitals (Chinese, Japanese) are left to the decision's
  private question, as is anything said without a name.

Every pattern runs in time linear in its input: a repeated part starts only where the character
before it cannot continue it, and no two repeats of the same characters stand side by side.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

import phonenumbers
from stdnum import iban, luhn
from stdnum.us import ssn

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b")
#: Domains no one can register: for documentation and tests (RFC 2606, RFC 6761).
_RESERVED_DOMAIN = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE)
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
_DATE = r"(?:\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\d{1,2} [A-Z][a-z]+ \d{4}|[A-Z][a-z]+ \d{1,2},? \d{4})"
#: Who a health record is about: a labelled patient name, a date of birth with its value, or a
#: medical record number.
_HEALTH_SUBJECT = re.compile(
    rf"\b(?i:born(?: on)?|DOB|D\.O\.B\.|date of birth|birth ?date)\s*(?:[:=]\s*)?{_DATE}"
    r"|\b(?i:patient(?: name)?)\s*[:=]\s*[A-Z][a-z]+ [A-Z][a-z]+|\bMRN\s*(?:[:#]\s*)?\d{4,}")
#: What makes it a health record: a clinical fact about that person.
_CLINICAL = re.compile(r"\b(?:diagnos[ie]s|diagnosed|prescri(?:bed|ption)|medication|dosage|admitted|discharged|"
                       r"symptoms?|HbA1c|blood pressure|troponin|insulin|chemotherapy|ICD-10|allerg(?:y|ies|ic))\b",
                       re.IGNORECASE)

_UPPER = "A-ZÀ-ÖØ-ÞĀ-Ž"
_LOWER = "a-zß-öø-ÿā-ž"
_WORD = rf"[{_UPPER}][{_LOWER}]+(?:-[{_UPPER}][{_LOWER}]+)?"
#: Two or three capitalised words in a row (with the particles of European surnames between).
_FULL_NAME = re.compile(rf"(?<![\w{_UPPER}{_LOWER}])({_WORD})(?: (?:van|von|de|der|da|di|del|dos|le|la|ten))? ({_WORD})\b")
#: A capitalised name after a word for the person's relation to the writer or the team.
_RELATION = (r"colleague|co-?worker|teammate|employee|report|direct report|manager|boss|intern|contractor|"
             r"candidate|tenant|client|customer|patient|neighbou?r|friend|brother|sister|mother|father|mom|dad|"
             r"wife|husband|partner|son|daughter|cousin|uncle|aunt|"
             r"Kollegin|Kollege|Mitarbeiterin|Mitarbeiter|collègue|employée?|compañer[oa]|emplead[oa]|"
             r"collega|dipendente|colega|funcionári[oa]|collega|medewerker")
_NAMED_BY_RELATION = re.compile(rf"\b(?i:{_RELATION})(?:,)? ({_WORD})\b")
#: A capitalised name in the possessive: "Tom's hourly rate".
_POSSESSIVE = re.compile(rf"(?<![\w{_UPPER}{_LOWER}])({_WORD})['’]s\b")
#: Capitalised pairs that are no person: places, products, days, teams and sentence openers.
_NOT_NAMES = frozenset("""
    The A An This That These Those It Its Our Your My Their His Her We You They I He She Please Can Could Would Should
    Will How What Why When Where Which Who Hi Hello Dear Thanks Thank Also And But Or So If Then Here There Let Make
    Write Help Draft Give Tell Explain Fix Add Create Review Check Show Find Use Keep Send Summarise Summarize Rewrite
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August September
    October November December New York San Francisco Los Angeles United States Kingdom States America Europe European
    Google Microsoft Amazon Apple Meta Slack Jira Confluence Github Gitlab Docker Kubernetes Python Java Javascript
    Typescript Rust Go Linux Windows Mac Excel Word Powerpoint Outlook Teams Zoom Sheets Docs Drive Cloud Web Services
    Azure Oracle Postgres Redis Kafka Spark Node React Vue Angular Django Flask Spring Rails Terraform Ansible Helm
    Chrome Firefox Safari Android Iphone Ios North South East West Street Road Avenue City County Union Bank Inc Ltd Corp
    Team Engineering Sales Marketing Finance Legal Support Product Design Operations People Hr Board Q1 Q2 Q3 Q4
    Der Die Das Ein Eine Le La Les Un Une El Los Las Il Lo Gli Het Een Bitte Merci Gracias Grazie Obrigado
""".split())
#: Facts about a person that are theirs to tell: pay, health, performance and discipline, legal,
#: family and immigration matters.
_SENSITIVE = re.compile(r"\b(?:" + "|".join([
    # pay
    r"salary|salaries|pay ?rise|pay ?raise|a raise|bonus|compensation|paid|earns?|earning|base pay|wages?|"
    r"hourly rate|an hour|per hour|\d+(?:[.,]\d+)?[ \t]?k|"
    r"Gehalt|Lohn|brutto|verdient|salaire|rémunération|brut|gagne|salario|sueldo|cobra|stipendio|retribuzione|"
    r"lordi|guadagna|salário|ganha|salaris|loon|bruto|verdient",
    # health
    r"diagnos\w*|cancer|tumou?r|depress\w*|anxiety|burn-?out|pregnan\w*|miscarriage|therapy|therapist|rehab|"
    r"medication|surgery|sick leave|medical leave|illness|chemo\w*|HIV|diabet\w*|psychiatri\w*|mental health|"
    r"Krankheit|krankgeschrieben|Depression|Schwangerschaft|maladie|enceinte|enfermedad|embarazada|baja médica|"
    r"malattia|incinta|doença|grávida|ziekte|zwanger|ziek",
    # performance and discipline
    r"performance review|performance improvement plan|PIP|underperform\w*|written warning|final warning|"
    r"disciplinary|misconduct|fired|dismiss\w*|terminat\w*|let go|laid off|demot\w*|annual review|appraisal|"
    r"rated \d|probation|underdeliver\w*|Leistungsbeurteilung|entretien annuel|valutazione|evaluación|beoordeling|"
    r"Abmahnung|Kündigung|licenciement|avertissement|despido|amonestación|licenziamento|demissão|ontslag",
    # legal
    r"lawsuit|sued|suing|arrest\w*|convict\w*|criminal record|DUI|custody|restraining order|probation|"
    r"Strafverfahren|Anklage|procès|condamn\w*|demanda|juicio|denuncia|processo|rechtszaak",
    # family
    r"divorc\w*|separat(?:ed|ion) from|affair|adoption|IVF|fertility|"
    r"Scheidung|séparation|divorcio|divorzio|divórcio|scheiding",
    # immigration
    r"visa|green card|work permit|residence permit|asylum|deport\w*|immigration status|H-1B|undocumented|"
    r"Aufenthaltstitel|Visum|titre de séjour|permiso de residencia|permesso di soggiorno|verblijfsvergunning",
]) + r")\b", re.IGNORECASE)
#: The stretch of text a name and its fact must share: one sentence, or this many characters.
_NEAR = 160


def personal_data_in(text: str, regions: Iterable[str] = ()) -> set[str]:
    """The kinds of personal data in `text`; phone numbers in national form only for `regions`."""
    found = set()
    if "@" in text and any(not _RESERVED_DOMAIN.search(m.group().rpartition("@")[2]) for m in _EMAIL.finditer(text)):
        found.add("e-mail address")
    if any(ssn.is_valid(m.group()) for m in _SSN.finditer(text)):
        found.add("US social security number")
    if any(iban.is_valid(m.group()) for m in _IBAN.finditer(text)):
        found.add("IBAN")
    if any(_card(m.group()) for m in _CARD.finditer(text)):
        found.add("payment card number")
    if _HEALTH_SUBJECT.search(text) and _CLINICAL.search(text):
        found.add("health record")
    if _named_with_a_sensitive_fact(text):
        found.add("a named person's sensitive facts")
    for region in ((None,) if "+" in text else ()) + tuple(regions):  # no region: "+" numbers only
        if any(True for _ in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID)):
            found.add("phone number")
            break
    return found


def _card(candidate: str) -> bool:
    digits = re.sub(r"[ -]", "", candidate)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn.is_valid(digits)


def _names(text: str) -> Iterable[int]:
    """Where a person's name stands in `text`."""
    for match in _FULL_NAME.finditer(text):
        if match.group(1) not in _NOT_NAMES and match.group(2) not in _NOT_NAMES:
            yield match.start()
    for pattern in (_NAMED_BY_RELATION, _POSSESSIVE):
        for match in pattern.finditer(text):
            if match.group(1) not in _NOT_NAMES:
                yield match.start(1)


def _named_with_a_sensitive_fact(text: str) -> bool:
    # Names first: most texts have none, and the scan for facts is the dearer of the two.
    names = list(_names(text))
    if not names:
        return False
    facts = [m.start() for m in _SENSITIVE.finditer(text)]  # in order
    for name in names:
        # The facts within reach of this name, found by bisection (a long text may hold many).
        for fact in facts[bisect_left(facts, name - _NEAR):bisect_right(facts, name + _NEAR)]:
            if "\n\n" not in text[min(name, fact):max(name, fact)]:
                return True
    return False
