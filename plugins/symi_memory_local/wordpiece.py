"""Token ids of plain ASCII text for the bundled MiniLM tokenizer, without loading ``tokenizers``.

Importing the ``tokenizers`` package and parsing the bundled ``tokenizer.json`` cost a one-shot search more
CPU than embedding its query, all of it holding the GIL. For the common case (a query of printable ASCII
text that fits one window) the ids follow from the vocabulary alone: the bundled tokenizer lowercases,
splits on whitespace and on each punctuation character, cuts every word into the longest vocabulary pieces
from its start (``##`` marking a continuation; a word that cannot be cut, or is longer than 100
characters, is ``[UNK]``) and wraps the result in ``[CLS]`` ... ``[SEP]``. Any other text (non-ASCII
characters, control characters, a special token's literal, more than one window) returns None and goes
to the real tokenizer. tests/test_local_provider.py checks the ids against ``tokenizers`` on the
benchmark corpora and generated text.

The vocabulary comes from a file written the first time the real tokenizer is loaded (an index run), in
``memorySearch.local.modelCacheDir``: one piece per line in id order, named after the CRC-32 and size of
its bytes, which are checked when it is read.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Vocabulary", "WordPiece", "load_wordpiece", "save_wordpiece"]

log = logging.getLogger("symi_memory.local")

#: The special tokens of the bundled tokenizer (matched in the raw text before anything else).
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100
_PLAIN = re.compile(r"[\t\n\r\x20-\x7e]*")
# After lowercasing: runs of letters and digits, and every other visible character on its own (all ASCII
# punctuation and symbols are punctuation to the BERT pre-tokenizer); whitespace separates.
_WORDS = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


class Encoding:
    """The parts of a ``tokenizers.Encoding`` the embedder reads."""

    __slots__ = ("attention_mask", "ids", "overflowing", "type_ids")

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self.attention_mask = [1] * len(ids)
        self.type_ids = [0] * len(ids)
        self.overflowing: list[Any] = []


class Vocabulary:
    """Piece -> id over the saved file's bytes (one piece a line, in id order), looked up in place.

    Building a dict of the 30,522 pieces took a one-shot query ~10 ms of CPU holding the GIL (beside the
    main thread's work); a query looks up a few dozen pieces, each a search of the bytes (tens of
    microseconds). The file's lines are distinct: it is written from the tokenizer's vocabulary (a mapping)
    and checked against its checksum when read.
    """

    __slots__ = ("_ids", "_lines", "_searches")

    #: Searches of the bytes before the dict is built after all (long unknown words try many pieces).
    MAX_SEARCHES = 200

    def __init__(self, data: bytes) -> None:
        self._lines = b"\n" + data + b"\n"
        self._searches = 0
        self._ids: dict[str, int] | None = None

    def get(self, piece: str) -> int | None:
        if self._ids is not None:
            return self._ids.get(piece)
        if "\n" in piece or "\r" in piece or not piece.isascii():
            return None  # never a line of the file (pieces of plain text are ASCII without line breaks)
        self._searches += 1
        if self._searches > self.MAX_SEARCHES:
            pieces = self._lines[1:-1].decode("utf-8").split("\n")
            self._ids = dict(zip(pieces, range(len(pieces)), strict=True))
            return self._ids.get(piece)
        at = self._lines.find(b"\n" + piece.encode("ascii") + b"\n")
        return None if at < 0 else self._lines.count(b"\n", 0, at)

    def __getitem__(self, piece: str) -> int:
        found = self.get(piece)
        if found is None:
            raise KeyError(piece)
        return found

    def __contains__(self, piece: object) -> bool:
        return isinstance(piece, str) and self.get(piece) is not None


class WordPiece:
    """:meth:`encode` gives the bundled tokenizer's ids for plain ASCII text, or None for any other text."""

    def __init__(self, vocab: Mapping[str, int] | Vocabulary, *, max_tokens: int) -> None:
        self.vocab = vocab
        self.max_tokens = max_tokens
        self.cls, self.sep, self.unk = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]

    def encode(self, text: str) -> Encoding | None:
        if _PLAIN.fullmatch(text) is None or any(s in text for s in SPECIAL):
            return None
        ids = [self.cls]
        for word in _WORDS.findall(text.lower()):
            ids.extend(self._pieces(word))
            if len(ids) > self.max_tokens - 1:
                return None  # more than one window: the tokenizer's overflow handling cuts them
        ids.append(self.sep)
        return Encoding(ids)

    def _pieces(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        vocab, out, start = self.vocab, [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    out.append(found)
                    break
                end -= 1
            else:
                return [self.unk]  # no piece fits: the whole word is unknown
            start = end
        return out


def _name(data: bytes) -> str:
    # A checksum of the contents against damage (a file cut short or zeroed), not against tampering: the
    # folder is this user's own cache. zlib is cheap to import, hashlib is not (OpenSSL: ~7 ms).
    import zlib

    return f"vocab-{zlib.crc32(data):08x}-{len(data)}.txt"


def load_wordpiece(folder: Path, *, max_tokens: int) -> WordPiece | None:
    """The encoder over the vocabulary saved in ``folder``; None when there is none or it does not check out."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith("vocab-") and n.endswith(".txt")]
    except OSError:
        return None
    for name in names:
        try:
            data = (folder / name).read_bytes()
        except OSError:
            continue
        if _name(data) != name:
            log.warning("the saved tokenizer vocabulary %s is damaged; removing it", folder / name)
            (folder / name).unlink(missing_ok=True)
            continue
        vocab = Vocabulary(data)
        if all(s in vocab for s in SPECIAL):
            return WordPiece(vocab, max_tokens=max_tokens)
    return None


def save_wordpiece(folder: Path, tokenizer: Any) -> None:
    """Save the vocabulary of ``tokenizer`` (the bundled one) for :func:`load_wordpiece`; best effort.

    Written to a private file, flushed to the disk and renamed into place, so a reader finds the whole
    file or none (and its name is the checksum of what it must hold).
    """
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    pieces = sorted(vocab, key=vocab.__getitem__)
    if [vocab[p] for p in pieces] != list(range(len(pieces))) or any("\n" in p or "\r" in p for p in pieces):
        return  # not a dense, line-safe vocabulary: the real tokenizer serves
    data = "\n".join(pieces).encode("utf-8")
    target = folder / _name(data)
    if target.is_file():
        return
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, target)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("could not save the tokenizer vocabulary in %s (%s)", folder, exc)
        tmp.unlink(missing_ok=True)
