"""convs2s: the tested helper package of the Convolutional Sequence to Sequence Learning course.

The notebooks build each idea from scratch and compare it with the versions here:

- ``convs2s.layers``: ``ConvGLUBlock`` (convolution + gated linear unit), init and weight norm
- ``convs2s.encoder`` / ``convs2s.decoder`` / ``convs2s.attention``: the model's three parts
- ``convs2s.model``: ``ConvS2S``, the whole translator
- ``convs2s.decode``: ``greedy_decode`` and ``beam_search`` (incremental)
- ``convs2s.data``: Multi30k, spaCy tokenizers, ``Vocab``, bucketed batches
- ``convs2s.train`` / ``convs2s.translate`` / ``convs2s.evaluate`` / ``convs2s.metrics``
- ``convs2s.config``: quick mode, data folder, device
"""

__version__ = "0.1.0"

from convs2s import config  # noqa: E402
from convs2s.attention import Attention  # noqa: E402
from convs2s.data import (  # noqa: E402
    BucketBatchSampler,
    DataError,
    PadCollate,
    Tokenizer,
    TranslationDataset,
    Vocab,
    check_length,
    load_multi30k,
    load_pairs,
    make_loader,
    make_tokenizer,
    padding_ratio,
)
from convs2s.decode import beam_search, greedy_decode  # noqa: E402
from convs2s.decoder import Decoder  # noqa: E402
from convs2s.encoder import Encoder, EncoderOut  # noqa: E402
from convs2s.layers import ConvGLUBlock  # noqa: E402
from convs2s.model import ConvS2S, count_parameters  # noqa: E402

__all__ = [
    "Attention", "BucketBatchSampler", "ConvGLUBlock", "ConvS2S", "DataError", "Decoder",
    "Encoder", "EncoderOut", "PadCollate", "Tokenizer", "TranslationDataset", "Vocab",
    "beam_search", "check_length", "config", "count_parameters", "greedy_decode",
    "load_multi30k", "load_pairs", "make_loader", "make_tokenizer", "padding_ratio",
]


def __getattr__(name):
    # The training-side names load torch's optimizers, sacreBLEU etc. only when first used.
    lazy = {
        "Translator": "convs2s.translate",
        "corpus_bleu": "convs2s.metrics",
        "PRESETS": "convs2s.train",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'convs2s' has no attribute {name!r}")
