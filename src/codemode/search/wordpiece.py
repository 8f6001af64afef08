"""BERT's uncased WordPiece tokenization for ASCII text, in plain Python.

Loading the ``tokenizers`` library's tokenizer for MiniLM costs about 50 ms (a 700 KB JSON file
turned into Rust structures), more than embedding a query. A search from a fresh process needs
the ids of one short query, so for ASCII text this module gives the ids the ``tokenizers``
pipeline gives (``BertNormalizer`` with lowercasing, ``BertPreTokenizer``, ``WordPiece`` with
``##`` continuations, then ``[CLS] ... [SEP]``) from a vocabulary read in a few milliseconds.
Text with any non-ASCII character goes to the real tokenizer (accents, CJK and Unicode
punctuation are its business); tests compare both on every tool text of the real specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["VOCAB_FILE", "WordPiece", "write_vocab"]

VOCAB_FILE = "vocab.txt"
_MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word: longer words become [UNK]
# BERT counts every non-alphanumeric printable ASCII character as punctuation.
_PUNCTUATION = frozenset(chr(c) for c in (*range(33, 48), *range(58, 65), *range(91, 97)))
_PUNCTUATION |= frozenset(chr(c) for c in range(123, 127))
_WHITESPACE = frozenset(" \t\n\r")


class WordPiece:
    """Token ids of ASCII text, as the model's own tokenizer gives them."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self._ids = {token: i for i, token in enumerate(vocab)}
        self._cls, self._sep, self._unk = (self._ids[t] for t in ("[CLS]", "[SEP]", "[UNK]"))

    @classmethod
    def load(cls, path: Path) -> WordPiece | None:
        """The vocabulary in ``path`` (one token per line, line number = id), or None when it
        cannot be read or lacks the special tokens."""
        try:
            vocab = path.read_text(encoding="utf-8").split("\n")
            return cls(vocab[:-1] if vocab and vocab[-1] == "" else vocab)
        except (OSError, UnicodeDecodeError, KeyError):
            return None

    @staticmethod
    def handles(text: str) -> bool:
        return text.isascii()

    def ids(self, text: str, max_length: int) -> list[int]:
        """``[CLS]``, the word pieces (at most ``max_length - 2``), ``[SEP]``."""
        pieces: list[int] = []
        room = max_length - 2
        for word in _words(text):
            pieces += self._word_ids(word)
            if len(pieces) >= room:
                break
        return [self._cls, *pieces[:room], self._sep]

    def _word_ids(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self._unk]
        out: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self._ids.get(piece)
                if found is not None:
                    out.append(found)
                    break
                end -= 1
            else:
                return [self._unk]  # a part no piece matches: the whole word is unknown
            start = end
        return out


def _words(text: str) -> list[str]:
    """Lowercased words and single punctuation characters. Control characters are dropped
    without splitting a word (BERT's normalizer removes them before splitting)."""
    words: list[str] = []
    current: list[str] = []
    for char in text:
        if (ord(char) < 32 or ord(char) == 127) and char not in _WHITESPACE:
            continue
        if char in _WHITESPACE or char in _PUNCTUATION:
            if current:
                words.append("".join(current))
                current = []
            if char in _PUNCTUATION:
                words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return [word.lower() for word in words]


def write_vocab(tokenizer_json: Path, target: Path) -> bool:
    """Write the WordPiece vocabulary of ``tokenizer_json`` to ``target`` (atomically); False
    when the file is not a WordPiece tokenizer with dense ids."""
    import json
    import os

    try:
        model = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]
        vocab: dict[str, int] = model["vocab"]
        if model.get("type") != "WordPiece" or sorted(vocab.values()) != list(range(len(vocab))):
            return False
        tokens = sorted(vocab, key=vocab.__getitem__)
        if any("\n" in token for token in tokens):
            return False
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.write_text("\n".join(tokens) + "\n", encoding="utf-8")
        partial.replace(target)
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False
