"""The plain-Python WordPiece tokenizer gives exactly the ids the model's own tokenizer gives,
for every ASCII text a search meets, and the encoder uses it only where that holds."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from codemode.connectors.openapi import load_spec, operations_to_specs
from codemode.search.documents import tool_documents
from codemode.search.encoder import MiniLMEncoder, model_dir
from codemode.search.wordpiece import WordPiece, write_vocab

pytestmark = pytest.mark.needs_model

DATA = Path(__file__).resolve().parents[1] / "data"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def tokenizers_pipeline():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=96)
    return tokenizer


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    assert write_vocab(model_dir() / "tokenizer.json", vocab)
    loaded = WordPiece.load(vocab)
    assert loaded is not None
    return loaded


def _texts() -> list[str]:
    texts = [
        task["query"]
        for name in ("search_dev.json", "search_heldout.json")
        for task in json.loads((BENCHMARKS / name).read_text())["tasks"]
    ]
    for spec in sorted((DATA / "specs").glob("*.json.gz")):
        specs = operations_to_specs("x", load_spec(spec))
        for document in tool_documents(specs):
            texts += [*document.semantic_texts, document.fields[3][:1500]]
    rng = random.Random(7)
    alphabet = string.printable + "\x00\x01\x1b\x7f"
    words = ["refund", "unbelievable", "xyzzyq", "a" * 120, "GitHub", "don't", "v1.2", "__x__"]
    for _ in range(3000):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
        texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(0, 9))))
    return texts


def test_ids_match_the_models_tokenizer_on_real_and_random_text(wordpiece, tokenizers_pipeline):
    checked = 0
    for text in _texts():
        if not wordpiece.handles(text):
            continue
        assert wordpiece.ids(text, 96) == tokenizers_pipeline.encode(text).ids, repr(text)
        checked += 1
    assert checked > 10000


def test_non_ascii_text_is_left_to_the_real_tokenizer(wordpiece):
    assert not wordpiece.handles("crème brûlée")
    assert not wordpiece.handles("支付")
    assert wordpiece.handles("refund a charge")


def test_a_short_ascii_query_does_not_load_the_tokenizers_pipeline(tmp_path, np):
    encoder = MiniLMEncoder(cache_dir=tmp_path)
    reference = MiniLMEncoder()  # no cache: the tokenizers pipeline for everything
    query = "give a customer their money back"
    vector = encoder.encode([query])[0]
    assert encoder._loaded_tokenizer is None
    assert np.allclose(vector, reference.encode([query])[0], atol=1e-6)
    assert reference._wordpiece is None and reference._loaded_tokenizer is not None
    encoder.encode(["rembourser un client débité"])  # not ASCII: the real tokenizer
    assert encoder._loaded_tokenizer is not None


def test_the_vocabulary_is_read_on_the_first_query_not_when_the_encoder_starts(tmp_path):
    # An index build (and a gateway that never searches) keeps no 4 MiB vocabulary dict.
    encoder = MiniLMEncoder(cache_dir=tmp_path)
    assert encoder._wordpiece is None
    encoder.encode(["refund a charge"])
    assert encoder._wordpiece is not None and encoder._loaded_tokenizer is None


def test_a_vocabulary_without_its_special_tokens_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\n")
    assert WordPiece.load(vocab) is None
    assert WordPiece.load(tmp_path / "missing.txt") is None
