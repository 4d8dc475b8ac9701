"""The arguments of ``python -m convs2s.train`` (``convs2s-train``): the parser, the check of
each value (a wrong one is one line and exit status 2, before any data loads), and the preset
fields they override. :func:`convs2s.run.train.main` runs the command."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import torch

from convs2s.data import LANGUAGES
from convs2s.data.subword import TOKENIZER_KINDS
from convs2s.run.presets import DISTILLED_MIXES, MAX_RDROP, PRESETS
from convs2s.system import arguments
from convs2s.system.compiling import COMPILE_MODES

__all__ = ["MAX_LAYERS", "MAX_WIDTH", "make_parser", "overrides"]

#: The largest model sizes the command takes (the paper's largest WMT model has 15 + 15
#: layers up to 2,048 channels wide); the package's own checks have no upper bound. Together
#: they are bounded by the model's parameters (convs2s.run.prepare.MAX_MODEL_PARAMETERS).
MAX_LAYERS, MAX_WIDTH = 64, 4096


def _number_arg(inside: Callable[[float], bool], expected: str):
    """argparse ``type`` for a number that ``inside`` accepts (NaN never is); anything else is
    refused in one line, "expected <expected>, not <the text>"."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not inside(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, not {arguments.brief(text)}")
        return value

    return parse


#: dropout, label smoothing: a probability from 0 to below 1
_fraction = _number_arg(lambda v: 0 <= v < 1, "a number from 0 to below 1")
#: a learning rate or the factor it shrinks by: above 0, at most 1
_share = _number_arg(lambda v: 0 < v <= 1, "a number above 0 and at most 1")
_rdrop_weight = _number_arg(lambda v: 0 <= v <= MAX_RDROP,
                            f"a number from 0 (off) to {MAX_RDROP:g}")
_sampling_alpha = _number_arg(lambda v: 0 <= v <= 1, "a number from 0 (off) to 1")
_minutes = _number_arg(lambda v: 0 < v < math.inf, "a number of minutes > 0")
#: --out: not an empty name, not a path through a symbolic link to nothing
_folder = arguments.folder_arg("--out")


def _existing_file(give: str) -> Callable[[str], str]:
    """argparse ``type`` for a file flag: an existing file, as an absolute path (what the
    checkpoints record, so that ``--resume`` from another folder names the same file); else a
    line ending in ``give``, what to give instead."""
    def parse(text: str) -> str:
        path = arguments.expanded(text)
        if not text.strip() or not path.is_file():
            what = "a folder" if path.is_dir() else "no such file"
            raise argparse.ArgumentTypeError(f"{arguments.brief(text)}: {what}; {give}")
        return str(path.resolve())
    return parse


#: --distilled: the teacher's translations
_distilled_file = _existing_file(
    "give the file of the teacher's translations (python -m convs2s.run.distill --teacher "
    "CHECKPOINT --out FILE writes one)")
#: --init-from: the checkpoint a continued run starts from
_checkpoint_file = _existing_file(
    "give a checkpoint file (a run's best.pt or final.pt, or a shipped model: "
    "src/convs2s/run/models/de-en.pt)")


def _languages(text: str) -> tuple[str, ...]:
    """argparse ``type`` for ``--extra-sources``: languages separated by commas ("fr,cs")."""
    langs = tuple(lang.strip() for lang in text.split(","))
    unknown = [lang for lang in langs if lang not in LANGUAGES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"Multi30k has no language {arguments.brief(unknown[0], 20)}; give languages of "
            f"{', '.join(LANGUAGES)} separated by commas, e.g. fr,cs")
    return langs


def _device(text: str) -> torch.device:
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{arguments.brief(text)} is not a device (cpu, cuda, mps)"
                                         ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("cuda was asked for but this machine has no CUDA GPU "
                                         "(or this torch is a CPU build); use --device cpu")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError("mps was asked for but is not available; use cpu")
    return dev


def make_parser() -> arguments.OneLineParser:
    """The command's parser (the presets' names as they are now)."""
    parser = arguments.OneLineParser(
        prog="python -m convs2s.train",
        description="Train ConvS2S on Multi30k (any direction; German→English by default)."
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", required=True, type=_folder, help="folder for best.pt and last.pt")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    parser.add_argument("--data-dir", type=arguments.data_folder_arg,
                        help="Multi30k folder (default: CONVS2S_DATA_DIR)")
    parser.add_argument("--device", type=_device,
                        help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--epochs", type=arguments.whole_number_arg,
                        help="override the preset's epochs")
    parser.add_argument("--max-steps", type=arguments.whole_number_arg,
                        help="override the preset's step limit")
    parser.add_argument("--max-minutes", type=_minutes, help="override the preset's time budget")
    parser.add_argument("--src", choices=LANGUAGES, help="source language (default: the "
                        "preset's, de)")
    parser.add_argument("--trg", choices=LANGUAGES, help="target language (default: the "
                        "preset's, en)")
    parser.add_argument("--tokenizer", choices=TOKENIZER_KINDS,
                        help="word: lower-cased spaCy words; subword: cased sentencepiece "
                        "pieces (default: the preset's)")
    parser.add_argument("--vocab-size", type=arguments.bounded_int_arg(arguments.MAX_VOCAB_SIZE),
                        help="subword pieces per vocabulary (default: the preset's, 8000)")
    parser.add_argument("--joint-vocab", action=argparse.BooleanOptionalAction, default=None,
                        help="subword: one vocabulary for both languages (default) or one each")
    parser.add_argument("--share-embed", action=argparse.BooleanOptionalAction, default=None,
                        help="tie the decoder's output layer to its token embedding (fairseq's "
                        "--share-input-output-embed; default: the preset's: on in the "
                        "subword presets, off in the word-level ones)")
    parser.add_argument("--layers", type=arguments.bounded_int_arg(MAX_LAYERS),
                        help="override the model's convolutional layers, as many in the "
                        "encoder as in the decoder (the cpu_subword preset's: 4)")
    parser.add_argument("--emb-dim", type=arguments.bounded_int_arg(MAX_WIDTH),
                        help="override the model's token embedding size (cpu_subword: 256)")
    parser.add_argument("--hid-dim", type=arguments.bounded_int_arg(MAX_WIDTH),
                        help="override the model's convolution channels (cpu_subword: 256)")
    parser.add_argument("--dropout", type=_fraction, help="override the model's dropout "
                        "(the cpu_subword preset's: 0.2)")
    parser.add_argument("--label-smoothing", type=_fraction,
                        help="override the preset's label smoothing (0.1)")
    parser.add_argument("--lr", type=_share, help="override the peak learning rate, reached "
                        "after the warm-up (the cpu_subword preset's: 0.002)")
    parser.add_argument("--warmup-steps", type=arguments.whole_number_arg,
                        help="override the updates "
                        "the rate rises over from 0 to its peak (cpu_subword: 200)")
    parser.add_argument("--lr-shrink", type=_share, help="override what the rate is multiplied "
                        "by after each epoch without a better validation loss (0.5; 1: never)")
    parser.add_argument("--rdrop", type=_rdrop_weight, metavar="WEIGHT", help="R-Drop: each "
                        "batch through the model twice (two dropout masks), WEIGHT times the "
                        "symmetric KL between the two passes added to the mean of their losses "
                        "(twice the step's time; the paper's alpha is 2 x WEIGHT); default 0: off")
    parser.add_argument("--subword-sampling", type=_sampling_alpha, metavar="ALPHA",
                        help="subword regularisation (subword tokenizer only): each epoch every "
                        "training sentence segmented afresh at random, by BPE-dropout with "
                        "probability ALPHA for a BPE vocabulary (the presets'), or from all "
                        "segmentations with smoothing ALPHA for a unigram one (0.1-0.2 typical); "
                        "validation and translation use the best segmentation; seeded by the "
                        "run's seed and the epoch; default 0: off")
    parser.add_argument("--distilled", type=_distilled_file, metavar="FILE", help="sequence-level "
                        "knowledge distillation (Kim & Rush, 2016): train on a teacher's "
                        "translations of the training sources, FILE one target per line for "
                        "every pair of the training split (python -m convs2s.run.distill "
                        "writes it); validation keeps the real references; default: none")
    parser.add_argument("--distilled-mix", choices=DISTILLED_MIXES, help="with --distilled: "
                        "replace (the teacher's targets alone; the default) or add (the "
                        "references and the teacher's targets, every source twice)")
    parser.add_argument("--extra-sources", type=_languages, metavar="LANGS", help="more sources "
                        "of the same English targets, e.g. fr,cs for a de->en run: their "
                        "Multi30k training captions become training pairs too, and the "
                        "subword vocabulary is learned on every source and the target; "
                        "validation stays in --src/--trg's direction (into English, subword "
                        "tokenizer only); default: none")
    parser.add_argument("--init-from", type=_checkpoint_file, metavar="CHECKPOINT",
                        help="continued training: start from this checkpoint's weights, "
                        "vocabularies and text pipeline (a run's best.pt or final.pt, or a "
                        "shipped model; the same architecture and direction), with a fresh "
                        "optimizer, warm-up and schedule; default: random weights")
    parser.add_argument("--patience", type=arguments.whole_number_arg, help="override the preset's "
                        "epochs without a better validation loss before stopping")
    parser.add_argument("--compile", nargs="?", const="default", choices=COMPILE_MODES,
                        metavar="MODE", help="torch.compile the training step: default (MODE "
                        "left out), reduce-overhead or max-autotune (both replay CUDA graphs "
                        "on a GPU); off unless given")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def overrides(args: argparse.Namespace) -> dict:
    """The preset fields the parsed ``args`` set (those given), by the preset's names."""
    given = (("epochs", args.epochs), ("max_steps", args.max_steps),
             ("max_minutes", args.max_minutes), ("src_lang", args.src), ("trg_lang", args.trg),
             ("tokenizer", args.tokenizer), ("vocab_size", args.vocab_size),
             ("joint_vocab", args.joint_vocab), ("share_input_output_embed", args.share_embed),
             ("enc_layers", args.layers), ("dec_layers", args.layers),
             ("emb_dim", args.emb_dim), ("hid_dim", args.hid_dim), ("dropout", args.dropout),
             ("label_smoothing", args.label_smoothing), ("lr", args.lr),
             ("warmup_steps", args.warmup_steps), ("lr_shrink", args.lr_shrink),
             ("rdrop", args.rdrop), ("subword_sampling", args.subword_sampling),
             ("distilled", args.distilled), ("distilled_mix", args.distilled_mix),
             ("extra_sources", args.extra_sources), ("init_from", args.init_from),
             ("patience", args.patience), ("compile", args.compile))
    return {name: value for name, value in given if value is not None}
