"""Secret redaction for text that leaves a session transcript.

Transcripts hold whatever users pasted, so API keys, bearer tokens and
passwords in URLs are replaced before the text is indexed or shown.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"

# Order matters: specific key shapes first, then the generic assignments.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host keeps the user, hides the password.
    (re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@]+):[^\s@/]+@", re.IGNORECASE), r"\1:" + REDACTED + "@"),
    # A bearer token needs a digit or punctuation so prose ("the bearer instrument") survives.
    (
        re.compile(r"\b(bearer)\s+(?=\S*[0-9._~+/\-])[A-Za-z0-9\-._~+/]{12,}=*", re.IGNORECASE),
        r"\1 " + REDACTED,
    ),
    (re.compile(r"\b(authorization:\s*basic)\s+[A-Za-z0-9+/]{8,}=*", re.IGNORECASE), r"\1 " + REDACTED),
    (re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{12,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), REDACTED),
    (re.compile(r"\bxox[abprse]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"), REDACTED),
    # key=value / "token": "value" / password: value; short values are left
    # alone (e.g. "password: yes") because they are rarely secrets.
    (
        re.compile(
            r"""(?ix)
            (\b[\w.\-]*(?:api[_\-]?key|apikey|secret|token|passwd|password|pwd|access[_\-]?key)
             ["']?\s*[:=]\s*["']?)
            ([^\s"',;]{8,})
            """
        ),
        r"\1" + REDACTED,
    ),
)


# What each pattern cannot match without: text with none of it is left as it is, unsearched. Most text holds no
# secret, and a pattern opening with ``\b`` is tried at every word (the assignments' one at every character of
# every word): looked for first, these take a transcript's redaction from ~1 s to ~0.05 s per MB. ``(literals,
# False)``: the pattern matches them as they are. ``(literals, True)``: it matches them in any case; in ASCII text
# that is the text lowercased holding one, elsewhere (where case folds more ways: "ſ" is an "s" to it) a search
# with the pattern's own flags.
_GATES: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("://",), False),
    (("bearer",), True),
    (("authorization",), True),
    (("sk-",), False),
    (("AKIA", "ASIA"), False),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    (("github_pat_",), False),
    (("xox",), False),
    (("AIza",), False),
    (("eyJ",), False),
    (("apikey", "api_key", "api-key", "secret", "token", "passwd", "password", "pwd", "accesskey", "access_key",
      "access-key"), True),
)
_FOLDED = {needles: re.compile("|".join(map(re.escape, needles)), re.IGNORECASE)
           for needles, folded in _GATES if folded}


def redact(text: str) -> str:
    """Return ``text`` with API keys, bearer tokens and URL passwords replaced by ``[REDACTED]``."""
    ascii_lower = text.lower() if text.isascii() else None
    for (pattern, replacement), (needles, folded) in zip(_PATTERNS, _GATES, strict=True):
        if not folded:
            if not any(needle in text for needle in needles):
                continue
        elif ascii_lower is not None:
            if not any(needle in ascii_lower for needle in needles):
                continue
        elif _FOLDED[needles].search(text) is None:
            continue
        text = pattern.sub(replacement, text)
        if ascii_lower is not None:  # still ASCII: the replacements are
            ascii_lower = text.lower()
    return text
