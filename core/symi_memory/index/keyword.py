"""Keyword query building: OR-joined word tokens, BM25 mapping, CJK bigrams.

The unicode61 tokenizer treats a CJK run as one token, so ``金银价格`` would
never match ``金银价格上涨``. Every CJK run is therefore also indexed as
overlapping bigrams in a second column, and a CJK query token becomes a
phrase of its bigrams there: a phrase of consecutive bigrams is exactly a
substring match.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from itertools import compress, filterfalse, repeat
from operator import not_
from typing import TypeVar, cast

import attrs

__all__ = [
    "ExactMatcher",
    "TokenPattern",
    "cjk_bigrams",
    "fold",
    "identifier_tokens",
    "match_tokens",
    "query_tokens",
    "token_pattern",
    "token_term",
]

WORD_RE = re.compile(r"\w+", re.UNICODE)
CJK_CLASS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\U00020000-\U0002fa1f"
)
CJK_RUN_RE = re.compile(f"[{CJK_CLASS}]+")
# Tokens that embeddings cannot represent but keyword search nails: hashes,
# ticket IDs, versions, env var names.
K = TypeVar("K", bound=Hashable)

IDENT_RE = re.compile(r"^(?=\w*\d)\w{4,}$|^\w*_\w*$|^[A-Z][A-Z0-9]{2,}$")


def query_tokens(text: str) -> list[str]:
    """Unicode word runs (letters, digits, underscore), de-duplicated in order."""
    seen: dict[str, None] = {}
    for tok in WORD_RE.findall(text):
        seen.setdefault(tok, None)
    return list(seen)


def cjk_bigrams(text: str) -> str:
    """Space-separated bigrams (and single characters of 1-char runs) of every CJK run."""
    out: list[str] = []
    for run in CJK_RUN_RE.findall(text):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return " ".join(out)


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def token_term(token: str) -> str:
    """The FTS5 expression matching one query token (CJK runs also as a bigram phrase)."""
    alts = ["text : " + _quote(token)]
    for run in CJK_RUN_RE.findall(token):
        if len(run) == 1:
            alts.append("cjk : " + _quote(run) + "*")
        else:
            alts.append("cjk : " + _quote(cjk_bigrams(run)))
    return alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")"


def match_tokens(tokens: list[str]) -> str | None:
    """An FTS5 MATCH expression for query tokens: every token quoted, all OR-joined."""
    terms = [token_term(tok) for tok in tokens]
    return " OR ".join(terms) if terms else None


# FTS5's unicode61 with remove_diacritics 2 strips accents from Latin letters only (й, έ keep theirs).
LATIN_MARKS_RE = re.compile("(?<=[A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f]+")


def fold(text: str) -> str:
    """Lower-case and strip Latin diacritics, as the FTS5 ``unicode61 remove_diacritics 2`` tokenizer does."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    return unicodedata.normalize("NFC", LATIN_MARKS_RE.sub("", unicodedata.normalize("NFD", lowered)))


@functools.lru_cache(maxsize=4096)
def _fold_text(text: str) -> str:
    """:func:`fold` of a candidate's text, remembered: the same chunks come back query after query."""
    return fold(text)


@functools.lru_cache(maxsize=4096)
def token_pattern(token: str) -> re.Pattern[str]:
    """A regex finding ``token`` as a whole token (CJK runs as plain substrings)."""
    folded = re.escape(fold(token))
    if CJK_RUN_RE.search(token):
        return re.compile(folded)
    # The token first, then "no letter or digit before it" as a look-behind from its end: a pattern that
    # starts with a literal is searched for that literal (about 10x faster on a chunk than a leading
    # look-behind, tried at every position); the look-behind spans the token, so it asks the same.
    return re.compile(folded + r"(?<![^\W_]" + folded + r")(?![^\W_])")


class TokenPattern:
    """:func:`token_pattern` of one token, compiled on its first search (about 0.25 ms a compile).

    A query's tokens are matched only against texts that hold them as a substring, so a token no
    candidate holds (most identifiers of a new query) is never compiled. :meth:`found_in` answers
    whether the pattern matches without compiling it at all.
    """

    __slots__ = ("token", "_compiled", "_literal")

    def __init__(self, token: str) -> None:
        self.token = token
        self._compiled: re.Pattern[str] | None = None
        # The folded token, when a plain search for it with a look at the characters either side asks what the
        # regex asks (a CJK token is a plain substring: ``in``).
        folded = fold(token)
        self._literal: str | None = folded if folded and CJK_RUN_RE.search(token) is None else None

    def search(self, text: str) -> re.Match[str] | None:
        if self._compiled is None:
            self._compiled = token_pattern(self.token)
        return self._compiled.search(text)

    def found_in(self, folded: str) -> bool:
        """Whether :meth:`search` finds the token in ``folded`` (a :func:`fold`-ed text), with no regex.

        The pattern is the folded token with no letter or digit (``[^\\W_]``, which is ``str.isalnum`` of one
        character) right before or after it: each occurrence is looked at until one has neither. A query
        brings new tokens (identifiers, most of all), and compiling each one's regex cost more than every
        candidate's test together.
        """
        lit = self._literal
        if lit is None:
            return self.search(folded) is not None
        n, end = len(lit), len(folded)
        at = folded.find(lit)
        while at >= 0:
            after = at + n
            if (at == 0 or not folded[at - 1].isalnum()) and (after >= end or not folded[after].isalnum()):
                return True
            at = folded.find(lit, at + 1)
        return False


@attrs.frozen
class ExactMatcher:
    """Decides, in Python, which candidate texts hold every query token or an identifier token.

    Candidates are at most a few hundred short texts, so this is cheaper than
    asking FTS5 again (which ranks every match before filtering by rowid).
    """

    every: tuple[TokenPattern, ...]
    idents: tuple[TokenPattern, ...]
    # The folded token each pattern matches: a plain substring test rules most texts out before the
    # regex (whose leading look-behind makes it try every position) runs.
    every_literals: tuple[str, ...] = ()
    ident_literals: tuple[str, ...] = ()

    @classmethod
    def for_query(cls, text: str) -> ExactMatcher:
        tokens = query_tokens(text)
        return cls.for_tokens(tokens, identifier_tokens(tokens))

    @classmethod
    def for_tokens(cls, every: Sequence[str], idents: Sequence[str]) -> ExactMatcher:
        """A matcher for query tokens already split (``every``) and the identifier tokens among them."""
        return cls(tuple(TokenPattern(t) for t in every), tuple(TokenPattern(t) for t in idents),
                   tuple(fold(t) for t in every), tuple(fold(t) for t in idents))

    def holds_identifier(self, text: str) -> bool:
        """Whether ``text`` holds an identifier token of the query (``classify(text)[1]``, checked alone)."""
        if not self.idents:
            return False
        folded = _fold_text(text)
        if len(self.ident_literals) != len(self.idents):
            return any(p.search(folded) is not None for p in self.idents)
        return any(lit in folded and p.found_in(folded) for p, lit in zip(self.idents, self.ident_literals, strict=True))

    def identifier_holders(self, texts: Mapping[K, str],
                           candidates: Mapping[str, Collection[K]] | None = None) -> set[K]:
        """The keys of the ``texts`` that hold an identifier token of the query (:meth:`holds_identifier` of each).

        ``candidates``: for an identifier token of the query (a key, as the query spelled it), the keys of the
        only texts that may hold it (the caller knows from their term counts, say): the other texts are not
        searched for it. A token it does not name is searched for in every text; a key not in ``texts`` is
        none of them.
        """
        if not self.idents:
            return set()
        if len(self.ident_literals) != len(self.idents) or any(p._literal != lit for p, lit in
                                                               zip(self.idents, self.ident_literals, strict=True)):
            pairs = _pairs(self.idents, self.ident_literals)
            allowed = [None if candidates is None or (got := candidates.get(p.token)) is None else set(got)
                       for p, _ in pairs]
            out: set[K] = set()
            for key, text in texts.items():
                folded = _fold_text(text)
                for (pattern, literal), keys in zip(pairs, allowed, strict=True):
                    if (keys is None or key in keys) and literal in folded and pattern.found_in(folded):
                        out.add(key)
                        break
            return out
        held: set[K] = set()
        add = held.add
        fold_text = _fold_text
        if candidates is None:
            # Every token a plain literal (no CJK run): TokenPattern.found_in written out in one loop over the texts.
            literals = [(lit, len(lit)) for lit in self.ident_literals if lit]
            for key, text in texts.items():
                # An ASCII text folds to its lower case: made again, it costs less than remembering it (the lru
                # cache's look-up hashes the text, and its entries go through every generation of the collector).
                folded = text.lower() if text.isascii() else fold_text(text)
                for lit, n in literals:
                    at = folded.find(lit)
                    while at >= 0:
                        after = at + n
                        if (at == 0 or not folded[at - 1].isalnum()) and (after >= len(folded)
                                                                          or not folded[after].isalnum()):
                            add(key)
                            break
                        at = folded.find(lit, at + 1)
                    else:
                        continue
                    break
            return held
        # The same, one token at a time over the texts that may hold it (a token no candidate may hold, say a new
        # identifier, is searched for in none; most texts may hold one token of the query at most).
        get: Callable[[K], str | None] = texts.get
        for pattern in self.idents:  # each a plain literal here (checked above)
            token = pattern._literal
            if not token:
                continue
            n = len(token)
            listed: Collection[K] = candidates.get(pattern.token, texts.keys())
            if held:
                listed = list(filterfalse(held.__contains__, listed))
            chunks = list(map(get, listed))
            if None not in chunks and all(map(str.isascii, cast("list[str]", chunks))):
                # Every text ASCII (most searches): the ones holding the token between two spaces hold it, as
                # below (a space is no letter or digit), found in one pass in C; words are mostly parted by spaces.
                # The others are looked at one by one below.
                spaced = list(map(str.__contains__, cast("list[str]", chunks), repeat(f" {token} ")))
                held.update(compress(listed, spaced))
                listed = list(compress(listed, map(not_, spaced)))
            for key in listed:
                if key in held:
                    continue
                chunk = get(key)
                if chunk is None:
                    continue
                # An ASCII text: the token as the chunk has it, then as its lower case has it. An occurrence of the
                # (lower-case) token in it is one of its lower case too, at the same place with the same characters
                # either side (letters or digits still), and most texts hold it as written: lower casing a chunk
                # costs more than looking through it.
                if not chunk.isascii():
                    if pattern.found_in(fold_text(chunk)):
                        add(key)
                    continue
                # pattern.found_in(chunk) written out for its first occurrence, which most texts holding the token
                # hold it as (a call per candidate cost more than the look); the rest as found_in looks.
                at = chunk.find(token)
                if at >= 0:
                    after = at + n
                    if (at == 0 or not chunk[at - 1].isalnum()) and (after >= len(chunk)
                                                                      or not chunk[after].isalnum()):
                        add(key)
                        continue
                    if pattern.found_in(chunk):
                        add(key)
                        continue
                if pattern.found_in(chunk.lower()):
                    add(key)
        return held

    def classify(self, text: str) -> tuple[bool, bool]:
        """(holds every token or an identifier, holds an identifier)."""
        folded = _fold_text(text)
        ident = any(_has(folded, p, lit) for p, lit in _pairs(self.idents, self.ident_literals))
        full = ident or (bool(self.every) and all(_has(folded, p, lit)
                                                  for p, lit in _pairs(self.every, self.every_literals)))
        return full, ident


def _pairs(patterns: tuple[TokenPattern, ...], literals: tuple[str, ...]) -> list[tuple[TokenPattern, str]]:
    return list(zip(patterns, literals, strict=True)) if len(literals) == len(patterns) else [(p, "") for p in patterns]


def _has(folded: str, pattern: TokenPattern, literal: str) -> bool:
    return literal in folded and pattern.found_in(folded)


def identifier_tokens(text: str | Sequence[str]) -> list[str]:
    """Query tokens that look like identifiers (contain a digit or underscore, or ALLCAPS).

    ``text`` is the query, or its tokens already split by :func:`query_tokens`.
    """
    tokens = query_tokens(text) if isinstance(text, str) else text
    return [t for t in tokens if IDENT_RE.match(t)]
