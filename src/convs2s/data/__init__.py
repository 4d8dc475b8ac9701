"""The data layer: Multi30k loading, spaCy tokenizers, vocabularies, datasets and batching.

This package does on plain ``torch.utils.data`` what the classic tutorial does with torchtext's
legacy ``Multi30k.splits``, ``Field`` and ``BucketIterator``, which current torchtext lacks:

- :func:`load_multi30k` reads (and, when they are missing, downloads and sha256-checks) the raw
  Multi30k task-1 files of one direction (any two of English, German, French and Czech; German
  to English by default) and returns ``{"train", "valid", "test"}`` lists of
  ``(source, target)`` string pairs. :func:`load_pairs` reads any parallel pair of files.
- :func:`make_tokenizer` gives a lowercasing spaCy tokenizer for a language (the word-level
  pipeline; :mod:`convs2s.data.subword` has the cased subword one).
- :class:`Vocab` maps tokens to ids (``<unk>``, ``<pad>``, ``<bos>``, ``<eos>`` first).
- :class:`TranslationDataset` numericalises the pairs once, dropping over-long examples.
- :func:`make_loader` batches them with :class:`BucketBatchSampler` (similar lengths together,
  so little padding) into right-padded ``(src, trg)`` LongTensors of shape ``[batch, len]``.

Typical use::

    splits = load_multi30k()
    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src_vocab = Vocab.build(tok_de(de) for de, _ in splits["train"])
    trg_vocab = Vocab.build(tok_en(en) for _, en in splits["train"])
    train = TranslationDataset(splits["train"], tok_de, tok_en, src_vocab, trg_vocab, max_len=100)
    loader = make_loader(train, batch_size=128)
    for src, trg in loader:  # src [batch, src_len], trg [batch, trg_len] = <bos> ... <eos> <pad>
        ...

Its modules: :mod:`~convs2s.data.multi30k` (files, download, reading),
:mod:`~convs2s.data.tokenizers` (spaCy word tokenizers, ``detokenize``),
:mod:`~convs2s.data.vocab`, :mod:`~convs2s.data.batching` (datasets, bucketed batches),
:mod:`~convs2s.data.subword` (the cased sentencepiece pipeline) and
:mod:`~convs2s.data.truecase` (the case of all-lower-case or all-caps input, restored).
"""

from convs2s.data.batching import (
    BucketBatchSampler,
    PadCollate,
    TranslationDataset,
    check_length,
    make_loader,
    padding_ratio,
)
from convs2s.data.multi30k import (
    DEFAULT_DATA_URL,
    LANGUAGE_NAMES,
    LANGUAGES,
    MULTI30K_FILES,
    MULTI30K_SHA256,
    DataError,
    check_direction,
    fetch_multi30k,
    load_multi30k,
    load_pairs,
    multi30k_files,
)
from convs2s.data.tokenizers import Tokenizer, detokenize, make_tokenizer, nfc, plain_text
from convs2s.data.vocab import Vocab

__all__ = [
    "DataError",
    "MULTI30K_FILES",
    "MULTI30K_SHA256",
    "DEFAULT_DATA_URL",
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "check_direction",
    "multi30k_files",
    "fetch_multi30k",
    "load_multi30k",
    "load_pairs",
    "make_tokenizer",
    "detokenize",
    "nfc",
    "plain_text",
    "Tokenizer",
    "Vocab",
    "TranslationDataset",
    "BucketBatchSampler",
    "PadCollate",
    "make_loader",
    "padding_ratio",
    "check_length",
]
