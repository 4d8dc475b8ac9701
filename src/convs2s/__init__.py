"""convs2s: the tested helper package of the Convolutional Sequence to Sequence Learning course.

The notebooks build each idea from scratch and compare it with the versions here. The folders are
the package's layers; each imports only the ones listed before it:

- ``convs2s.system``: plumbing: the environment (quick mode, data folder, device), atomic files,
  signals
- ``convs2s.model``: ConvS2S (layers, encoder, attention, decoder), greedy and beam search, the
  loss, the RNN baseline and the variants of notebook 08 (torch only)
- ``convs2s.data``: Multi30k, spaCy tokenizers, ``Vocab``, bucketed batches, subwords
- ``convs2s.run``: presets, training, checkpoints, the final choices, ``Translator``, evaluation
- ``convs2s.course``: what serves the notebooks: diagrams, figures, probes, baselines, checks

``python -m convs2s.train`` / ``convs2s.translate`` / ``convs2s.evaluate`` are the commands
(``convs2s-train``, ``convs2s-translate``, ``convs2s-evaluate`` once installed).
"""

__version__ = "0.1.0"

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
from convs2s.model import (  # noqa: E402
    Attention,
    ConvGLUBlock,
    ConvS2S,
    ConvS2SConfig,
    Decoder,
    Encoder,
    EncoderOut,
    beam_search,
    count_parameters,
    greedy_decode,
)

__all__ = [
    "Attention", "BucketBatchSampler", "ConvGLUBlock", "ConvS2S", "ConvS2SConfig", "DataError",
    "Decoder", "Encoder", "EncoderOut", "PadCollate", "Tokenizer", "TranslationDataset", "Vocab",
    "beam_search", "check_length", "count_parameters", "greedy_decode",
    "load_multi30k", "load_pairs", "make_loader", "make_tokenizer", "padding_ratio",
    "Translator", "corpus_bleu", "PRESETS", "Preset", "Checkpoint", "pretrained",
]


def __getattr__(name):
    # The training-side names load torch's optimizers, sacreBLEU etc. only when first used.
    lazy = {
        "Translator": "convs2s.run.translator",
        "corpus_bleu": "convs2s.run.metrics",
        "PRESETS": "convs2s.run.presets",
        "Preset": "convs2s.run.presets",
        "Checkpoint": "convs2s.run.checkpoint",
        "pretrained": "convs2s.run.pretrained",  # the shipped translators: pretrained("de-en")
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'convs2s' has no attribute {name!r}")
