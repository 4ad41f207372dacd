"""The one rule of text that is not prose, for every format: what the model never reads and what
comes back exactly, in its place and form.

    [m.group() for m in PROTECTED.finditer('"{input}" ist keine Wahl: %d von %(n)s, siehe yahoo.com')]
    # ['"{input}"', '%d', '%(n)s', 'yahoo.com']
    has_letters("12.03.2024")   # False: a paragraph without letters is not sent to the model

Kept (each a Literal atom of paragraphs.py, or of markup.py's HTML: it takes no characters of the
text the model reads, and placement puts it back at its relative place with the spacing it had):
- URLs (http://, https://, ftp://, www.), e-mail addresses, bare domains (`yahoo.com`,
  `docs.python.org`, `example.de`: a country's top-level label or a common generic one, TLDS);
- printf conversions (`%s`, `%d`, `%1$s`, `%(name)s`, `%-5.2f`, `%%`) and Qt's `%1`;
- brace placeholders: Python's `{}`, `{0}`, `{name!r:>10}`, ICU's `{count, plural, one {# file}
  other {# files}}` (two levels of nesting), `${name}`, `{{name}}`;
- tags inside a localized string (`<b>`, `</a>`);
- a placeholder in quotes or brackets that touch it (`"{input}"`, `'%s'`, `(%d)`), quotes
  included: the quotes are part of its form.

What is around the text is kept too, by markup.place_spans: the whitespace and kept atoms before
the first word and after the last (a leading space, a trailing newline that gettext checks)
stay at the start and the end.
"""

from __future__ import annotations

import re

URL = r"(?:https?://|ftp://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]}'»]"
EMAIL = r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})+"
# a top-level label: a country's (two letters) or a generic one in common use; a longer list would
# take words glued after a full stop ("rot.hund") for domains
TLDS = ("com net org edu gov mil int info biz name pro aero coop museum mobi asia tel travel jobs io ai app dev "
        "page site online tech store shop blog cloud xyz top art club design news wiki email link live life "
        "world today space website").split()
DOMAIN = (r"(?<![\w@./-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
          rf"(?:[a-z]{{2}}|{'|'.join(TLDS)})(?![\w@-]|\.[A-Za-z0-9])")
PRINTF = r"%(?:\d+\$)?(?:\([^()\s]*\))?[-+#0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[sdifFeEgGxXoucrabp%]"
QT_ARG = r"%\d{1,2}(?![\d$])"
BRACES = r"\$?\{(?:[^{}]|\{(?:[^{}]|\{[^{}]{0,100}\}){0,100}\}){0,200}\}"
TAG = r"</?[A-Za-z][^<>\n]{0,200}>"
PLACEHOLDER_TEXT = f"{PRINTF}|{QT_ARG}|{BRACES}|{TAG}"
QUOTED = (rf"[\"'«»“”„‘’‚‹›](?:{PLACEHOLDER_TEXT})[\"'«»“”‘’‹›]"
          rf"|\((?:{PLACEHOLDER_TEXT})\)|\[(?:{PLACEHOLDER_TEXT})\]")

PLACEHOLDER = re.compile(f"{QUOTED}|{PLACEHOLDER_TEXT}")
PROTECTED = re.compile(f"{URL}|{EMAIL}|{DOMAIN}|{QUOTED}|{PLACEHOLDER_TEXT}")
LETTER = re.compile(r"[^\W\d_]")


def has_letters(text: str) -> bool:
    """Whether `text` holds a letter outside its protected parts: what is sent to the model.
    Numbers, dates, punctuation, symbols (`2024`, `12.03.2024`, `***`, `—`, `♪`), URLs and
    placeholders alone are kept as they are."""
    return bool(LETTER.search(PROTECTED.sub(" ", text)))


def protected_parts(text: str) -> list[tuple[str, bool]]:
    """`text` cut into (part, protected) pairs, in order; joined, the parts are `text`."""
    parts, pos = [], 0
    for match in PROTECTED.finditer(text):
        if match.start() > pos:
            parts.append((text[pos:match.start()], False))
        parts.append((match.group(), True))
        pos = match.end()
    if pos < len(text):
        parts.append((text[pos:], False))
    return parts
