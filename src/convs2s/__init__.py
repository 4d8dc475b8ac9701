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

__all__ = [
    "Attention", "BucketBatchSampler", "ConvGLUBlock", "ConvS2S", "ConvS2SConfig", "DataError",
    "Decoder", "Encoder", "EncoderOut", "PadCollate", "Tokenizer", "TranslationDataset", "Vocab",
    "beam_search", "check_length", "count_parameters", "greedy_decode",
    "load_multi30k", "load_pairs", "make_loader", "make_tokenizer", "padding_ratio",
    "Translator", "corpus_bleu", "PRESETS", "Preset", "Checkpoint", "pretrained",
]


#: Where each name of the package's top level lives: imported on first use, so that
#: ``import convs2s`` (the first thing ``python -m convs2s.translate`` does) loads no torch, and
#: a command catches Ctrl-C or SIGTERM while torch loads (``signals.import_command``).
_DATA = ("BucketBatchSampler", "DataError", "PadCollate", "Tokenizer", "TranslationDataset",
         "Vocab", "check_length", "load_multi30k", "load_pairs", "make_loader", "make_tokenizer",
         "padding_ratio")
_MODEL = ("Attention", "ConvGLUBlock", "ConvS2S", "ConvS2SConfig", "Decoder", "Encoder",
          "EncoderOut", "beam_search", "count_parameters", "greedy_decode")
#: The package's layers, as attributes of ``convs2s`` once asked for.
_LAYERS = ("system", "model", "data", "run", "course")


def __getattr__(name):
    import importlib

    if name in _LAYERS:
        return importlib.import_module(f"convs2s.{name}")
    lazy = {
        **dict.fromkeys(_DATA, "convs2s.data"),
        **dict.fromkeys(_MODEL, "convs2s.model"),
        "Translator": "convs2s.run.translator",
        "corpus_bleu": "convs2s.run.metrics",
        "PRESETS": "convs2s.run.presets",
        "Preset": "convs2s.run.presets",
        "Checkpoint": "convs2s.run.checkpoint",
        "pretrained": "convs2s.run.pretrained",  # the shipped translators: pretrained("de-en")
    }
    if name in lazy:
        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'convs2s' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__, *_LAYERS})
