"""Where convolutions are fast: ConvS2S vs an attentional GRU over sentence length and batch size.

    python benchmarks/length_sweep.py [--preset cpu] [--device cpu|cuda]
        [--lengths 8 16 32 64 128 256] [--tokens 4096] [--repeats 5]
        [--json benchmarks/results/length_sweep_cpu.json]

The paper's first argument is speed: a convolution computes every position of a layer at once,
a recurrent network one position after the other. Whether that makes a model faster depends on
whether the device has parallel units left idle by the batch. This sweep measures it.

- **Models.** ConvS2S with the sizes of a training preset (``cpu``: 256/256, 4+4 layers, k = 3)
  and :class:`convs2s.course.baselines.RNNAttentionSeq2Seq` with the same embedding size and the
  hidden size whose parameter count is closest (:func:`~convs2s.course.baselines
  .matched_rnn_config`), with the preset's vocabulary sizes (8,000 pieces for subword presets).
- **Synthetic batches.** Random token ids (no data needed): for each sentence length ``n`` (source
  and target alike), batches of ``--tokens // n`` sentences, so every batch holds the same number
  of target tokens; and, for decoding, batches from 1 sentence to that full budget.
- **Training tokens/s.** One training step (forward, backward, AdamW step) of each model on the
  same batch, interleaved (:func:`~convs2s.course.baselines.train_side_by_side`), after warm-up
  steps; the median of ``--repeats`` timed steps, and every step's rate (their spread).
- **The machine.** Its CPU, cores (and those this process may use), threads, and how busy other
  processes kept it during the run, in cores (:class:`convs2s.course.length_sweep.Watch`).
- **Decoding sentences/s.** Greedy and beam 5, incremental, <eos> switched off so that both models
  produce exactly ``n`` tokens; the median of ``--repeats`` runs.

It prints the ratios ConvS2S / RNN per length and batch size, and the shortest length at which
ConvS2S trains faster (the crossover), and writes everything (device, threads, date, command) as
JSON. One run each, alone on the machine: pin it on a shared machine
(``taskset -c 1 env OMP_NUM_THREADS=1 ...``).
"""

from __future__ import annotations

import statistics
import sys

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("length_sweep"))

import torch
from common import count_arg, json_arg, stamp, write_report

from convs2s.run.translate_cli import device_arg
from convs2s.system.arguments import (
    MAX_BATCH_SIZE,
    MAX_BEAM_SIZE,
    OneLineParser,
    bounded_int_arg,
    whole_number_arg,
)

DEFAULT_LENGTHS = (8, 16, 32, 64, 128, 256)


def _batch(n_sentences: int, length: int, vocab: int, generator: torch.Generator) -> tuple:
    """(src, trg) of random ids in [4, vocab): no padding, <bos> first in trg."""
    src = torch.randint(4, vocab, (n_sentences, length), generator=generator)
    trg = torch.randint(4, vocab, (n_sentences, length + 1), generator=generator)
    trg[:, 0] = 2  # <bos>
    return src, trg


def train_rates(models: dict, length: int, tokens: int, vocab: int, repeats: int, warmup: int,
                device: torch.device, generator: torch.Generator) -> dict[str, float | list]:
    """Median target tokens/s of one training step of each model at sentence ``length``
    (``"convs2s"``, ``"rnn"``), and every timed step's (``"convs2s_steps"``, ``"rnn_steps"``)."""
    from convs2s.course.baselines import train_side_by_side

    n_sentences = max(1, tokens // length)
    batches = [_batch(n_sentences, length, vocab, generator) for _ in range(warmup + repeats)]
    per_step: dict[str, list[float]] = {name: [] for name in models}
    train_side_by_side(models, batches[:warmup], steps=warmup, pad_idx=1, device=device)
    for batch in batches[warmup:]:
        logs = train_side_by_side(models, [batch], steps=1, pad_idx=1, device=device,
                                  warmup_steps=1)
        for name, run in logs.items():
            per_step[name].append(run.tokens / run.seconds)
    return {**{name: statistics.median(rates) for name, rates in per_step.items()},
            **{f"{name}_steps": rates for name, rates in per_step.items()}}


def decode_rates(models: dict, length: int, n_sentences: int, vocab: int, beam: int,
                 repeats: int, device: torch.device,
                 generator: torch.Generator) -> dict[str, float]:
    """Median sentences/s of each model decoding ``n_sentences`` sources of ``length`` into
    exactly ``length`` tokens (greedy when ``beam`` is 1)."""
    from convs2s.course.baselines import decoding_speed

    src, _ = _batch(n_sentences, length, vocab, generator)
    rates: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats + 1):  # the first run warms up
        for name, model in models.items():
            model.eval()
            with torch.no_grad():
                r = decoding_speed(model, [src], bos_idx=2, eos_idx=None, max_len=length,
                                   beam_size=beam, device=device)
            rates[name].append(r["sentences_per_s"])
    return {name: statistics.median(values[1:]) for name, values in rates.items()}


def crossover(rows: list[dict], key: str = "ratio") -> int | None:
    """The shortest length from which on ConvS2S is faster (ratio > 1) at every longer length;
    None if it never is. Pure: ``rows`` are ``{"length", key}`` in increasing length."""
    found = None
    for row in reversed(rows):
        if row[key] > 1.0:
            found = row["length"]
        else:
            break
    return found


def main(argv: list[str] | None = None) -> dict:
    from convs2s.course.baselines import RNNAttentionSeq2Seq, matched_rnn_config
    from convs2s.course.length_sweep import Watch, machine, machine_line
    from convs2s.model import ConvS2S, count_parameters
    from convs2s.run.presets import PRESETS
    from convs2s.system import environment

    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS),
                        help="ConvS2S sizes (default: cpu)")
    parser.add_argument("--device", type=device_arg, default=None,
                        help="cpu or cuda (default: the best)")
    parser.add_argument("--lengths", type=whole_number_arg, nargs="+",
                        default=list(DEFAULT_LENGTHS))
    parser.add_argument("--tokens", type=whole_number_arg, default=4096,
                        help="target tokens per training batch (default: 4096)")
    parser.add_argument("--decode-batches", type=bounded_int_arg(MAX_BATCH_SIZE), nargs="+",
                        default=None,
                        help="sentences per decoding batch (default: 1 and the full budget)")
    parser.add_argument("--vocab", type=whole_number_arg, default=8000,
                        help="vocabulary size of both sides (at least 5: ids 0-3 are special)")
    parser.add_argument("--repeats", type=whole_number_arg, default=5)
    parser.add_argument("--warmup", type=count_arg, default=2)
    parser.add_argument("--beam", type=bounded_int_arg(MAX_BEAM_SIZE), default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=json_arg, help="write the results here")
    args = parser.parse_args(argv)
    if min(args.lengths) < 2 or args.tokens < max(args.lengths):
        parser.error("--lengths must be >= 2 and --tokens at least the longest length")
    if args.vocab < 5:
        parser.error(f"--vocab must be at least 5 (ids 0-3 are <unk>, <pad>, <bos>, <eos>), "
                     f"got {args.vocab}")

    device = args.device or environment.device()
    m = PRESETS[args.preset].model
    positions = max(args.lengths) + 2
    torch.manual_seed(args.seed)
    conv = ConvS2S(args.vocab, args.vocab, emb_dim=m.emb_dim, hid_dim=m.hid_dim,
                   enc_layers=m.enc_layers, dec_layers=m.dec_layers, kernel_size=m.kernel_size,
                   dropout=0.0, max_positions=positions, src_pad_idx=1, trg_pad_idx=1)
    rnn_config = matched_rnn_config(count_parameters(conv), args.vocab, args.vocab,
                                    src_pad_idx=1, trg_pad_idx=1, emb_dim=m.emb_dim, dropout=0.0,
                                    max_positions=positions)
    rnn = RNNAttentionSeq2Seq(**rnn_config)
    models = {"convs2s": conv.to(device), "rnn": rnn.to(device)}
    params = {name: count_parameters(model) for name, model in models.items()}
    print(f"ConvS2S {params['convs2s']:,} vs GRU + attention {params['rnn']:,} parameters on "
          f"{environment.describe_device(device)}, {torch.get_num_threads()} threads", flush=True)
    g = torch.Generator().manual_seed(args.seed)
    watch = Watch()  # how busy other processes keep the machine meanwhile

    training = []
    for length in args.lengths:
        rates = train_rates(models, length, args.tokens, args.vocab, args.repeats, args.warmup,
                            device, g)
        row = {"length": length, "sentences": max(1, args.tokens // length), **rates,
               "ratio": rates["convs2s"] / rates["rnn"]}
        training.append(row)
        print(f"train  n={length:4d} ({row['sentences']:4d} sentences): ConvS2S "
              f"{rates['convs2s']:9,.0f} vs RNN {rates['rnn']:9,.0f} tokens/s = "
              f"{row['ratio']:.2f}x", flush=True)

    decoding = []
    for length in args.lengths:
        for n_sentences in args.decode_batches or (1, max(1, args.tokens // length)):
            for beam in (1, args.beam):
                rates = decode_rates(models, length, n_sentences, args.vocab, beam,
                                     args.repeats, device, g)
                row = {"length": length, "sentences": n_sentences, "beam": beam, **rates,
                       "ratio": rates["convs2s"] / rates["rnn"]}
                decoding.append(row)
                print(f"decode n={length:4d} batch {n_sentences:4d} beam {beam}: ConvS2S "
                      f"{rates['convs2s']:8.1f} vs RNN {rates['rnn']:8.1f} sentences/s = "
                      f"{row['ratio']:.2f}x", flush=True)

    report = stamp({
        "benchmark": "length_sweep",
        "device": environment.describe_device(device), "device_type": device.type,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "machine": {**machine(device), **watch.stop()},
        "preset": args.preset, "parameters": params, "rnn_config": rnn_config,
        "tokens_per_batch": args.tokens, "repeats": args.repeats, "vocab": args.vocab,
        "training": training, "training_crossover": crossover(training),
        "decoding": decoding,
    })
    print(f"machine: {machine_line(report['machine'])}")
    print(f"ConvS2S trains faster from n = {report['training_crossover']} on"
          if report["training_crossover"] else "ConvS2S trains faster at no length measured")
    write_report(args.json, report)
    return report

