"""ConvS2S vs an attentional GRU (Bahdanau et al., 2015): training and decoding speed.

    python benchmarks/speed.py [--preset cpu] [--device cpu|cuda] [--steps 30]
                               [--sentences 200] [--json benchmarks/results/speed_cpu.json]

One process, both models, identical conditions:

- **Models.** ConvS2S with the sizes of a training preset of :mod:`convs2s.run.train` (``cpu`` by
  default: 256/256, 4+4 layers), and :class:`convs2s.course.baselines.RNNAttentionSeq2Seq` with the
  same embedding size and the hidden size whose parameter count is closest
  (:func:`convs2s.course.baselines.matched_rnn_config`). Both counts are printed.
- **Training tokens/s.** Both train on the *same* Multi30k batches (the preset's
  ``max_tokens``), with the same optimizer settings, their steps interleaved so that both see
  the same machine load (:func:`convs2s.course.baselines.train_side_by_side`); a few warm-up
  steps are not timed. Tokens are real (non-pad) target tokens.
- **Decoding sentences/s.** Greedy decoding and beam search (beam 5), incremental, on the same
  validation sentences in the same batches. <eos> is switched off, so both models produce
  exactly ``--out-len`` tokens per sentence (default: the mean length of the references, with
  <eos>): after a few training steps the two models would otherwise stop at very different
  lengths, and a model that stops earlier does less work per sentence.

- **Arithmetic.** The floating-point operations per target token of one training step of each
  model (:func:`convs2s.course.baselines.training_flops`), and the rate each reached (GFLOP/s). At
  matched parameter counts the two models do about the same arithmetic per token; a device
  that is already kept busy by the batch (a CPU) then runs them at about the same speed, and
  only a device with parallelism to spare over positions (a GPU) can reward ConvS2S for not
  having a loop over time.

It prints the ratios ConvS2S / RNN and the targets they are reported against (training at
least 2x the RNN's tokens/s on a CPU, at least 5x on a GPU; reported, not enforced), and writes
everything (device, date, command) as JSON. Pin it to a core on a shared machine, e.g.
``taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/speed.py``.
"""

from __future__ import annotations

import copy
import shlex
import sys
import time
from datetime import UTC, datetime

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("speed"))

import torch
from common import count_arg, json_arg, write_report

from convs2s.run.translate_cli import device_arg
from convs2s.system.arguments import (
    MAX_BATCH_SIZE,
    MAX_BEAM_SIZE,
    OneLineParser,
    bounded_int_arg,
    whole_number_arg,
)

TARGETS = {"cpu": 2.0, "cuda": 5.0}  # ConvS2S / RNN training tokens/s


def main(argv: list[str] | None = None) -> dict:
    from convs2s.course.baselines import (
        RNNAttentionSeq2Seq,
        decoding_speed,
        matched_rnn_config,
        train_side_by_side,
        training_flops,
    )
    from convs2s.data import load_multi30k, make_loader
    from convs2s.model import count_parameters
    from convs2s.run.precision import mixed_precision
    from convs2s.run.prepare import build_model, prepare_data
    from convs2s.run.presets import PRESETS
    from convs2s.system import environment

    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS),
                        help="ConvS2S sizes and batch size (default: cpu)")
    parser.add_argument("--device", type=device_arg, default=None,
                        help="cpu or cuda (default: the best)")
    parser.add_argument("--steps", type=whole_number_arg, default=30,
                        help="timed training steps per model")
    parser.add_argument("--warmup", type=count_arg, default=3, help="untimed steps per model first")
    parser.add_argument("--sentences", type=whole_number_arg, default=200,
                        help="validation sentences decoded")
    parser.add_argument("--batch-size", type=bounded_int_arg(MAX_BATCH_SIZE), default=50,
                        help="sentences per decoding batch")
    parser.add_argument("--beam", type=bounded_int_arg(MAX_BEAM_SIZE), default=5)
    parser.add_argument("--out-len", type=whole_number_arg, default=None,
                        help="output tokens per decoded sentence (default: mean reference "
                             "length, counting <eos>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=json_arg, help="write the results here")
    args = parser.parse_args(argv)

    device = args.device or environment.device()
    torch.manual_seed(args.seed)
    preset = PRESETS[args.preset]
    t0 = time.perf_counter()
    data = load_multi30k()
    train_ds, valid_ds, src_vocab, trg_vocab = prepare_data(preset, data)
    pad, bos = trg_vocab.pad_idx, trg_vocab.bos_idx
    print(f"data ready in {time.perf_counter() - t0:.0f} s: {len(train_ds):,} training pairs, "
          f"vocabularies {len(src_vocab):,}/{len(trg_vocab):,}", flush=True)

    torch.manual_seed(args.seed)
    conv = build_model(preset, src_vocab, trg_vocab)
    rnn_config = matched_rnn_config(
        count_parameters(conv), len(src_vocab), len(trg_vocab), src_pad_idx=src_vocab.pad_idx,
        trg_pad_idx=pad, emb_dim=preset.model.emb_dim, dropout=preset.model.dropout,
        max_positions=preset.model.max_positions)
    rnn = RNNAttentionSeq2Seq(**rnn_config)
    params = {"convs2s": count_parameters(conv), "rnn": count_parameters(rnn)}
    m = preset.model
    print(f"ConvS2S ({m.emb_dim}/{m.hid_dim}, {m.enc_layers}+{m.dec_layers} "
          f"layers, k={m.kernel_size}): {params['convs2s']:,} parameters")
    print(f"GRU + attention (emb {m.emb_dim}, hidden {rnn_config['dec_hid_dim']}): "
          f"{params['rnn']:,} parameters", flush=True)

    loader = make_loader(train_ds, max_tokens=preset.max_tokens, shuffle=True, seed=args.seed)
    batches = []
    for src, trg in loader:
        batches.append((src, trg))
        if len(batches) == args.warmup + args.steps:
            break
    models = {"convs2s": conv, "rnn": rnn}
    common = dict(pad_idx=pad, lr=preset.lr, clip_norm=preset.clip_norm,
                  label_smoothing=preset.label_smoothing, device=device, amp=preset.amp)
    if args.warmup:
        train_side_by_side(models, batches[: args.warmup], steps=args.warmup, **common)
    t0 = time.perf_counter()
    logs = train_side_by_side(models, batches[args.warmup:], steps=args.steps, **common)
    train_wall = time.perf_counter() - t0
    training = {name: {"steps": run.steps, "seconds": run.seconds, "tokens": run.tokens,
                       "tokens_per_s": run.tokens_per_s} for name, run in logs.items()}
    ratio = training["convs2s"]["tokens_per_s"] / training["rnn"]["tokens_per_s"]
    target = TARGETS.get(device.type, TARGETS["cpu"])
    # Why the ratio is what it is: the arithmetic each model does per target token (one step on
    # the first timed batch, counted, not timed) and the arithmetic rate each one reached.
    src0, trg0 = batches[args.warmup]
    for name, model in models.items():
        counted = training_flops(model, src0, trg0, pad_idx=pad,
                                 label_smoothing=preset.label_smoothing)
        training[name]["flops_per_token"] = counted["flops_per_token"]
        training[name]["gflops_per_s"] = (counted["flops_per_token"]
                                          * training[name]["tokens_per_s"] / 1e9)
    flop_ratio = training["convs2s"]["flops_per_token"] / training["rnn"]["flops_per_token"]
    print(f"\ntraining ({args.steps} steps each on the same batches, {train_wall:.0f} s):")
    for name, row in training.items():
        print(f"  {name:>8}: {row['tokens_per_s']:9,.0f} target tokens/s   "
              f"{row['flops_per_token'] / 1e6:6.1f} MFLOP per token   "
              f"{row['gflops_per_s']:6.1f} GFLOP/s reached")
    print(f"  ratio ConvS2S / RNN: {ratio:.2f}x  (target >= {target:g}x on {device.type}: "
          f"{'met' if ratio >= target else 'NOT met'}); arithmetic per token ConvS2S / RNN: "
          f"{flop_ratio:.2f}x", flush=True)

    order = sorted(range(min(args.sentences, len(valid_ds))),
                   key=lambda i: len(valid_ds.src[i]))  # similar lengths together
    src_batches = [
        torch.nn.utils.rnn.pad_sequence([valid_ds.src[i] for i in order[j:j + args.batch_size]],
                                        batch_first=True, padding_value=src_vocab.pad_idx)
        for j in range(0, len(order), args.batch_size)
    ]
    out_len = args.out_len or round(sum(valid_ds.trg_lengths[i] - 1 for i in order) / len(order))
    print(f"\ndecoding {len(order)} validation sentences, exactly {out_len} output tokens each",
          flush=True)
    decoding = {}
    for beam in (1, args.beam):
        label = "greedy" if beam == 1 else f"beam{beam}"
        decoding[label] = {}
        for name, model in models.items():
            # a copy per measurement: both models decode with identical, frozen weights
            result = decoding_speed(copy.deepcopy(model), src_batches, bos_idx=bos,
                                    eos_idx=None, max_len=out_len, beam_size=beam,
                                    device=device)
            result.pop("outputs")
            result["mean_output_tokens"] = result["output_tokens"] / result["sentences"]
            decoding[label][name] = result
        d = decoding[label]
        d["ratio"] = d["convs2s"]["sentences_per_s"] / d["rnn"]["sentences_per_s"]
        print(f"\ndecoding, {label} ({d['convs2s']['sentences']} sentences):")
        for name in models:
            r = d[name]
            print(f"  {name:>8}: {r['sentences_per_s']:8.1f} sentences/s "
                  f"(mean output {r['mean_output_tokens']:.1f} tokens)")
        print(f"  ratio ConvS2S / RNN: {d['ratio']:.2f}x", flush=True)

    report = {
        "benchmark": "speed",
        "device": environment.describe_device(device),
        "device_type": device.type,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "preset": args.preset,
        "parameters": params,
        "rnn_config": rnn_config,
        "training": {**training, "ratio": ratio, "flops_per_token_ratio": flop_ratio,
                     "target_ratio": target,
                     "target_met": ratio >= target, "steps": args.steps,
                     "warmup_steps": args.warmup, "max_tokens": preset.max_tokens,
                     "precision": mixed_precision(device, preset.amp).describe()},
        "decoding": {**decoding, "output_tokens_per_sentence": out_len, "eos": "disabled",
                     "batch_size": args.batch_size},
    }
    write_report(args.json, report)
    return report

