"""Which subword library, and joint or per-side vocabularies: the measurement behind the choice.

    python benchmarks/subword_choice.py [--src de --trg en] [--vocab-size 8000]
        [--json benchmarks/results/subword_choice.json]

On the Multi30k training split of one direction (validation for the held-out figures) it
trains, with each library and model type,

- sentencepiece (unigram, BPE) and Hugging Face ``tokenizers`` (BPE, unigram, with the
  Metaspace pre-tokenizer/decoder that makes them reversible),

and reports, per candidate: training seconds (joint vocabulary, both sides), tokens per sentence
on validation (each side), the round trip ``decode(encode(s)) == s`` on the cased validation
sentences (exact, and up to whitespace runs), the ``<unk>`` rate on validation, and whether two
trainings give the same vocabulary (determinism). For the chosen library it then compares a
joint vocabulary with one per side: tokens per sentence, and the share of each side's vocabulary
that side's training text uses (a joint vocabulary spends entries on the other language).
Nothing is written except ``--json``.
"""

from __future__ import annotations

import importlib.util
import io
import statistics
import sys
import time

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("subword_choice"))

from common import json_arg, stamp, write_report

from convs2s.data import load_multi30k
from convs2s.system.arguments import OneLineParser, whole_number_arg

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]


def _squash(s: str) -> str:
    return " ".join(s.split())


# --------------------------------------------------------------------------------- candidates


def sp_train(lines: list[str], vocab_size: int, model_type: str):
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size,
        model_type=model_type, character_coverage=1.0, normalization_rule_name="identity",
        hard_vocab_limit=False,  # as convs2s.data.subword: vocab_size is an upper bound
        unk_id=0, pad_id=1, bos_id=2, eos_id=3, unk_piece="<unk>", pad_piece="<pad>",
        bos_piece="<bos>", eos_piece="<eos>", minloglevel=2, num_threads=1,
    )
    proc = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    vocab = [proc.id_to_piece(i) for i in range(proc.get_piece_size())]
    return (lambda s: proc.encode(s, out_type=str)), (lambda p: proc.decode(p)), vocab


def hf_train(lines: list[str], vocab_size: int, model_type: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if model_type == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                      show_progress=False)
    else:
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                          unk_token="<unk>", show_progress=False)
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(lines, trainer=trainer)
    vocab = sorted(tok.get_vocab(), key=tok.get_vocab().get)

    def decode(pieces):
        return tok.decode([tok.token_to_id(p) for p in pieces], skip_special_tokens=False)

    return (lambda s: tok.encode(s).tokens), decode, vocab


CANDIDATES = {  # the first one is also used for the joint vs per-side comparison
    "sentencepiece bpe": lambda lines, v: sp_train(lines, v, "bpe"),
    "sentencepiece unigram": lambda lines, v: sp_train(lines, v, "unigram"),
    "tokenizers bpe": lambda lines, v: hf_train(lines, v, "bpe"),
    "tokenizers unigram": lambda lines, v: hf_train(lines, v, "unigram"),
}


def measure(name, train_lines, valid_sides, vocab_size):
    t0 = time.perf_counter()
    encode, decode, vocab = CANDIDATES[name](train_lines, vocab_size)
    seconds = time.perf_counter() - t0
    _, _, vocab2 = CANDIDATES[name](train_lines, vocab_size)
    out = {"train_seconds": round(seconds, 2), "vocab_size": len(vocab),
           "deterministic": vocab == vocab2}
    known = set(vocab)
    for side, lines in valid_sides.items():
        pieces = [encode(s) for s in lines]
        back = [decode(p) for p in pieces]
        n = sum(map(len, pieces))
        same = list(zip(back, lines, strict=True))
        out[side] = {
            "tokens_per_sentence": round(n / len(lines), 2),
            "round_trip_exact": round(sum(b == s for b, s in same) / len(lines), 4),
            "round_trip_up_to_spaces": round(sum(b == _squash(s) for b, s in same) / len(lines),
                                             4),
            # sentencepiece returns an unseen character as itself, id <unk>; tokenizers "<unk>"
            "unk_rate": round(sum(q not in known or q == "<unk>" for p in pieces for q in p) / n,
                              5),
        }
    return out


def coverage(encode, train_lines, vocab) -> float:
    """Share of the (non-special) vocabulary that ``train_lines`` use at least once."""
    used = {p for s in train_lines for p in encode(s)}
    real = [p for p in vocab if p not in SPECIALS]
    return round(sum(p in used for p in real) / len(real), 4)


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default="de")
    parser.add_argument("--trg", default="en")
    parser.add_argument("--vocab-size", type=whole_number_arg, default=8000)
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES),
                        help="default: every one whose library is installed")
    parser.add_argument("--per-side-sizes", type=whole_number_arg, nargs="+",
                        help="vocabulary sizes per side to compare with the joint one "
                        "(default: half and all of --vocab-size)")
    parser.add_argument("--split", default="valid", choices=["valid", "test"],
                        help="held-out text for the figures (default: valid)")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    hf = importlib.util.find_spec("tokenizers") is not None  # not among the package's needs
    if args.candidates is None:
        args.candidates = [n for n in CANDIDATES if hf or not n.startswith("tokenizers")]
        if not hf:
            print("Hugging Face tokenizers is not installed: its candidates are left out "
                  "(pip install tokenizers to compare them too)", flush=True)
    elif not hf and any(n.startswith("tokenizers") for n in args.candidates):
        parser.error("the tokenizers candidates need Hugging Face tokenizers: pip install "
                     "tokenizers, or leave them out of --candidates")
    data = load_multi30k(src=args.src, trg=args.trg, download=False)
    train_src = [s for s, _ in data["train"]]
    train_trg = [t for _, t in data["train"]]
    held = data[args.split]
    valid = {args.src: [s for s, _ in held], args.trg: [t for _, t in held]}
    report = {"benchmark": "subword_choice", "src": args.src, "trg": args.trg,
              "held_out": args.split,
              "vocab_size": args.vocab_size, "candidates": {}}
    for name in args.candidates:
        r = measure(name, train_src + train_trg, valid, args.vocab_size)
        report["candidates"][name] = r
        print(name, r, flush=True)
    # joint vs per side, with the first candidate
    name = args.candidates[0]
    enc, _, vocab = CANDIDATES[name](train_src + train_trg, args.vocab_size)
    joint = {side: {"tokens_per_sentence": round(statistics.mean(len(enc(s)) for s in lines), 2),
                    "vocab_used_by_side": coverage(enc, tr, vocab)}
             for (side, lines), tr in zip(valid.items(), (train_src, train_trg), strict=True)}
    report["joint_vs_per_side"] = {"library": name, f"joint_{args.vocab_size}": joint}
    for size in args.per_side_sizes or [args.vocab_size // 2, args.vocab_size]:
        per_side = {}
        for (side, lines), tr in zip(valid.items(), (train_src, train_trg), strict=True):
            e, _, v = CANDIDATES[name](tr, size)
            per_side[side] = {
                "tokens_per_sentence": round(statistics.mean(len(e(s)) for s in lines), 2),
                "vocab_used_by_side": coverage(e, tr, v), "vocab_size": len(v)}
        report["joint_vs_per_side"][f"per_side_{size}_each"] = per_side
    print(report["joint_vs_per_side"])
    write_report(args.json, stamp(report))
    return 0

