# ruff: noqa: E501 - the answers are written as a learner would write them
"""For every autograded exercise, the visible check and grading give the same verdict.

Each exercise gets right answers written in different styles (a loop, a vectorised one, one
that works in place, helpers of any name, other variable names, numbers as Python, NumPy or
one-element tensor values where the check's form allows them) and wrong ones (the typical
mistakes). Each answer runs through:

- the check, as in the course notebook: the answer cell run in a namespace holding the setup
  cell's imports (``answer_rules.define``, which keeps the cell's text as IPython does), then
  ``checks.<exercise>(...)``;
- grading, as ``nbgrader autograde`` does it (``coursework/sandbox_grading.py``):
  ``grader.grade`` runs the setup cell of the graded copy (the notebook's exercise-setup cell,
  then ``checks.graded_copy()``: ``tools/coursework.py``'s ``_graded_setup``) and the answer
  cell's text in the bubblewrap sandbox, on the calls of the exercise's hidden test
  (``coursework/hidden/NN.py``, the public version: variant ``{}``), and judges what came back
  outside it.

A right answer must pass both, a wrong one fail both. An answer that breaks only a static rule
of ``answer_rules`` and is right passes both too: the static read is advisory (the check notes
it, grading flags it for the instructor) and takes no marks (:data:`FLAGGED`). On the code before
grading moved out of the kernel this failed: a helper named ``_gru_parameters`` scored 0, 2.25
for 16/7 passed the check and failed the hidden test, an in-place sort in ``rerank`` passed the
check only.

Grading starts one sandbox per answer (about a second each), so each exercise's answers are one
test, graded a few at a time. These run the real sandbox: never skipped in CI.
"""

from __future__ import annotations

import os
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

from convs2s.course.checks import _core, answer_rules, grader, testing
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]

pytestmark = needs_sandbox


def _(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


RIGHT: dict[str, list[str]] = {
    "my_glu": [
        _("""
        def my_glu(h, dim=-1):
            if h.shape[dim] % 2 == 1:
                raise ValueError("odd")
            half = h.shape[dim] // 2
            a = h.narrow(dim, 0, half)
            b = h.narrow(dim, half, half)
            return a * torch.sigmoid(b)
        """),
        _("""
        def _halves(t, d):
            n = t.size(d)
            if n % 2:
                raise ValueError(f"size {n} is odd")
            return torch.split(t, n // 2, dim=d)

        def my_glu(h, dim=-1):
            content, gate = _halves(h, dim)
            return content * (1 / (1 + torch.exp(-gate)))
        """),
    ],
    "same_padding_moves": ["moved_outputs = [5, 6, 7, 8, 9]", "moved_outputs = (9, 8, 7, 6, 5)",
                           "moved_outputs = list(range(5, 10))",
                           "import numpy as np\nmoved_outputs = [np.int64(p) for p in range(5, 10)]",
                           "import numpy as np\nmoved_outputs = np.arange(5, 10)",
                           "moved_outputs = torch.arange(5, 10)"],
    "my_receptive_field": [
        "def my_receptive_field(k, n_layers):\n    return (k - 1) * n_layers + 1",
        _("""
        def my_receptive_field(k, n_layers):
            field = 1
            for _layer in range(n_layers):
                field += k - 1
            return field
        """),
    ],
    "residual_variance": ["variance_ratio = 2 ** 10", "variance_ratio = 4000.0",
                          "variance_ratio = torch.tensor(1024.0)",
                          "import numpy as np\nvariance_ratio = np.float64(2 ** 10)",
                          "variance_ratio = torch.tensor([1024.0])"],
    "mask_source_padding": [
        _("""
        def conv_stack(e, src_mask, emb2hid, convs, hid2emb):
            keep = src_mask.unsqueeze(1).float()
            x = emb2hid(e).transpose(1, 2)
            for conv in convs:
                x = x * keep
                k = conv.kernel_size[0]
                x = (F.glu(conv(F.pad(x, ((k - 1) // 2, (k - 1) // 2))), dim=1) + x) * math.sqrt(0.5)
            z = hid2emb(x.transpose(1, 2))
            return z * src_mask.unsqueeze(-1)
        """),
    ],
    "block_parameters": [
        "def block_parameters(hid_dim, kernel_size):\n"
        "    return 2 * hid_dim * (hid_dim * kernel_size + 2)",
        _("""
        def _weights(h, k):
            return 2 * h * h * k

        def block_parameters(hid_dim, kernel_size):
            total = _weights(hid_dim, kernel_size)
            total += 2 * hid_dim  # bias
            total += 2 * hid_dim  # g
            return total
        """),
    ],
    "causal_conv1d": [
        _("""
        def causal_conv1d(x, weight, bias):
            k = weight.size(-1)
            return F.conv1d(x, weight, bias, padding=k - 1)[..., : x.size(-1)]
        """),
        _("""
        def causal_conv1d(x, weight, bias):
            k = weight.shape[2]
            zeros = x.new_zeros(x.shape[0], x.shape[1], k - 1)
            return F.conv1d(torch.cat([zeros, x], dim=2), weight, bias)
        """),
    ],
    "teacher_forcing_loss": [
        _("""
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, :-1])
            gold = trg[:, 1:]
            keep = gold != pad_idx
            losses = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none")
            return losses[keep].mean()
        """),
    ],
    "cache_floats": [
        "def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
        "    return n_layers * (kernel_size - 1) * hid_dim",
        _("""
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            per_layer = 0
            for _column in range(kernel_size - 1):
                per_layer += hid_dim
            return per_layer * n_layers
        """),
    ],
    "masked_softmax": [
        _("""
        def masked_softmax(energy, src_mask):
            e = energy.masked_fill(~src_mask.unsqueeze(1), float("-inf"))
            return torch.softmax(e, dim=-1)
        """),
        _("""
        def masked_softmax(energy, src_mask):
            e = energy.masked_fill(~src_mask[:, None, :], float("-inf"))
            e = (e - e.amax(dim=-1, keepdim=True)).exp()  # [batch, trg_len, src_len]
            return e / e.sum(dim=-1, keepdim=True)
        """),
    ],
    "scaled_context_variance": ["predicted_variance = 16 / 7", "predicted_variance = 2.25",
                                "m = 8\nw = [0.5] + [1 / 14] * 7\n"
                                "predicted_variance = m * sum(x * x for x in w)",
                                "import numpy as np\npredicted_variance = np.float64(16 / 7)",
                                "predicted_variance = torch.tensor([16 / 7])"],
    "attention_macs": [
        "def attention_macs(n_layers, trg_len, src_len, emb_dim):\n"
        "    return 2 * n_layers * trg_len * src_len * emb_dim",
        _("""
        def attention_macs(n_layers, trg_len, src_len, emb_dim):
            per_layer = trg_len * src_len * emb_dim
            return per_layer * 2 * n_layers
        """),
    ],
    "row_entropy": [
        _("""
        def row_entropy(a):
            logs = torch.where(a > 0, a.log(), torch.zeros_like(a))
            return -(a * logs).sum(-1).mean()
        """),
        _("""
        def row_entropy(a):
            return -(a * torch.log(a + 1e-30)).sum(dim=-1).mean()
        """),
        _("""
        def row_entropy(a):
            return -torch.xlogy(a, a).sum(-1).mean()
        """),
        _("""
        def row_entropy(a):
            total = 0.0
            for row in a.tolist():
                total -= sum(p * math.log(p) for p in row if p > 0)
            return total / len(a)  # a Python float
        """),
        "def row_entropy(a):\n    return (-torch.xlogy(a, a).sum(-1).mean()).item()",
        "def row_entropy(a):\n    return torch.tensor(float(-torch.xlogy(a, a).sum(-1).mean()))  # 0-dim",
        "def row_entropy(a):\n    return -torch.xlogy(a, a).sum(-1).mean().reshape(1)  # one element",
    ],
    "build_itos": [
        _("""
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            counts = Counter()
            for tokens in token_lists:
                counts.update(tokens)
            words = sorted((w for w in counts if counts[w] >= min_freq and w not in specials),
                           key=lambda w: (-counts[w], w))
            return [*specials, *words]
        """),
        _("""
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            seen = {}
            for tokens in token_lists:
                for t in tokens:
                    seen[t] = seen.get(t, 0) + 1
            itos = list(specials)
            ordered = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
            itos += [t for t, n in ordered if n >= min_freq and t not in itos]
            return itos
        """),
    ],
    "token_loss": [
        _("""
        def token_loss(logits, trg_out, pad_idx):
            criterion = torch.nn.CrossEntropyLoss(ignore_index=pad_idx)
            return criterion(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1))
        """),
        _("""
        import torch.nn.functional as F

        def token_loss(logits, trg_out, pad_idx):
            each = F.cross_entropy(logits.flatten(0, 1), trg_out.flatten(), reduction="none")
            real = (trg_out.flatten() != pad_idx).float()
            return (each * real).sum() / real.sum()
        """),
    ],
    "perplexity_from_loss": [
        _("""
        def perplexity_from_loss(loss, unit="nats"):
            if unit == "nats":
                return math.exp(loss)
            if unit == "bits":
                return 2 ** loss
            raise ValueError(unit)
        """),
        _("""
        def perplexity_from_loss(loss, unit="nats"):
            base = {"nats": math.e, "bits": 2.0}[unit]
            return base ** loss
        """),
    ],
    "rerank": [
        _("""
        def rerank(hypotheses, alpha):
            def key(h):
                tokens, score = h
                n = len(tokens) + 1
                return score * n / n ** alpha
            return [tokens for tokens, _ in sorted(hypotheses, key=key, reverse=True)]
        """),
        _("""
        def rerank(hypotheses, alpha):
            rescored = []
            for i, (tokens, score) in enumerate(hypotheses):
                length = len(tokens) + 1
                rescored.append((-(score * length) / length ** alpha, i, tokens))
            rescored.sort()
            return [list(t) for _, _, t in rescored]
        """),
    ],
    "brevity_prediction": ["prediction = 100 * math.exp(-1)", "prediction = 36.8",
                           "prediction = 37", "import numpy as np\nprediction = np.float64(36.8)",
                           "import torch\nprediction = torch.tensor([100 * math.exp(-1)])"],
    "repeats": [
        _("""
        def repeats(tokens, n=1):
            for i in range(len(tokens) - 2 * n + 1):
                if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
                    return True
            return False
        """),
        _("""
        def repeats(tokens, n=1):
            return any(tokens[i:i + n] == tokens[i + n:i + 2 * n]
                       for i in range(0, len(tokens) - 2 * n + 1))
        """),
    ],
    "training_steps": [
        'prediction = {"GRU + attention": [20, 40, 80], "ConvS2S": [6, 6, 6]}',
        'prediction = {"ConvS2S": (6, 6, 6), "GRU + attention": [2 * n for n in (10, 20, 40)]}',
        'import numpy as np\nprediction = {"GRU + attention": [np.int64(n) for n in (20, 40, 80)], "ConvS2S": [np.int64(6)] * 3}',
    ],
    "path_length": [
        _("""
        import math

        def conv_path_length(n, k):
            return math.ceil(n / (k - 1))

        def rnn_path_length(n):
            return n
        """),
        _("""
        def conv_path_length(n, k):
            layers, seen = 0, 1
            while seen < n + 1:
                layers += 1
                seen += k - 1
            return layers

        def rnn_path_length(n):
            return int(n)
        """),
    ],
    "baseline_parameters": [
        _("""
        def _gru_parameters(i, h):
            return 3 * (h * i + h * h + 2 * h)

        def gru_parameters(input_size, hidden_size):
            return _gru_parameters(input_size, hidden_size)

        def baseline_parameters(config):
            c = config
            E, H, D = c["emb_dim"], c["enc_hid_dim"], c["dec_hid_dim"]
            A, O = c["attn_dim"], c["out_dim"]
            total = c["src_vocab_size"] * E + 2 * _gru_parameters(E, H) + 2 * H * D + D
            total += D * A + 2 * H * A + A + A
            total += c["trg_vocab_size"] * E + _gru_parameters(E + 2 * H, D)
            total += (D + 2 * H + E + 1) * 2 * O + (O + 1) * c["trg_vocab_size"]
            return total
        """),
    ],
    # practice: any of the sweep's six lengths, as an int, is accepted (the answer depends on
    # the machine)
    "speed_crossover": ["crossover_prediction = 64  # the RNN's steps get thin",
                        "crossover_prediction = 2 ** 3", "crossover_prediction = 256",
                        "crossover_prediction = int('16')",
                        "import numpy as np\ncrossover_prediction = np.int64(64)",
                        "import torch\ncrossover_prediction = torch.tensor([64])"],
    "separable_params": [
        _("""
        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + (c_out if bias else 0)

        def saving(c_in, c_out, k):
            return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)
        """),
        _("""
        def separable_params(c_in, c_out, k, bias=True):
            depthwise = c_in * k
            pointwise = c_in * c_out
            if bias:
                pointwise += c_out
            return depthwise + pointwise

        def saving(c_in, c_out, k):
            standard = c_out * (c_in * k + 1)
            return standard / separable_params(c_in, c_out, k, True)
        """),
    ],
    "attention_vs_conv": ["prediction = 3 * 256", "prediction = 768.0", "prediction = 760",
                          "import numpy as np\nprediction = np.float64(768)",
                          "import torch\nprediction = torch.tensor([768.0])"],
    "lightweight_conv": [
        _("""
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = torch.softmax(weight, dim=-1)
            kernel = kernel.repeat_interleave(channels // heads, dim=0).unsqueeze(1)
            return F.conv1d(F.pad(x, (k - 1, 0)), kernel, groups=channels)
        """),
        _("""
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            b, c, n = x.shape
            taps = torch.softmax(weight, -1).repeat_interleave(c // heads, 0)  # [c, k]
            padded = torch.cat([x.new_zeros(b, c, k - 1), x], dim=-1)
            out = torch.zeros_like(x)
            for j in range(k):
                out = out + padded[:, :, j:j + n] * taps[:, j].view(1, c, 1)
            return out
        """),
    ],
}

WRONG: dict[str, list[str]] = {
    "my_glu": ["def my_glu(h, dim=-1):\n    a, b = h.chunk(2, dim)\n    return a * torch.sigmoid(b)",
               "def my_glu(h, dim=-1):\n    a, b = h.chunk(2, dim)\n    if h.size(dim) % 2:\n"
               "        raise ValueError()\n    return torch.sigmoid(a) * b",
               "def my_glu(h, dim=-1):\n    return F.glu(h, dim)",
               "def my_glu(h, dim=-1):\n    return torch._C._nn.glu(h, dim)",
               "def my_glu(h, dim=-1):\n    return torch.ops.aten.glu(h, dim)",
               "def my_glu(h, dim=-1):\n    return torch.nn.GLU(dim)(h)"],
    "same_padding_moves": ["moved_outputs = [5, 6, 7, 8, 9, 10, 11]", "moved_outputs = [7, 8, 9]",
                           "moved_outputs = '5 6 7 8 9'"],
    "my_receptive_field": ["def my_receptive_field(k, n_layers):\n    return n_layers * k",
                           "def my_receptive_field(k, n_layers):\n    return float(1 + n_layers * (k - 1))"],
    "residual_variance": ["variance_ratio = 10", "variance_ratio = 1.0", "variance_ratio = -4000"],
    "mask_source_padding": [
        _("""
        def conv_stack(e, src_mask, emb2hid, convs, hid2emb):
            x = emb2hid(e).transpose(1, 2)
            x = x.masked_fill(~src_mask.unsqueeze(1), 0.0)
            for conv in convs:
                k = conv.kernel_size[0]
                x = (F.glu(conv(F.pad(x, ((k - 1) // 2, (k - 1) // 2))), dim=1) + x) * math.sqrt(0.5)
            z = hid2emb(x.transpose(1, 2))
            return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)
        """),
    ],
    "block_parameters": ["def block_parameters(hid_dim, kernel_size):\n"
                         "    return 2 * hid_dim * hid_dim * kernel_size + 2 * hid_dim",
                         "def block_parameters(hid_dim, kernel_size):\n"
                         "    return hid_dim * hid_dim * kernel_size + 2 * hid_dim"],
    "causal_conv1d": [
        "def causal_conv1d(x, weight, bias):\n    k = weight.size(-1)\n"
        "    return F.conv1d(x, weight, bias, padding=k - 1)[..., k - 1:]",
        "def causal_conv1d(x, weight, bias):\n    k = weight.size(-1)\n"
        "    return F.conv1d(x, weight, bias, padding=(k - 1) // 2)",
    ],
    "teacher_forcing_loss": [
        _("""
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, :-1])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg[:, 1:].reshape(-1))
        """),
        _("""
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, 1:])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg[:, 1:].reshape(-1),
                                   ignore_index=pad_idx)
        """),
    ],
    "cache_floats": ["def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
                     "    return n_layers * kernel_size * hid_dim",
                     "def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
                     "    return n_layers * (kernel_size - 1) * hid_dim * steps"],
    "masked_softmax": [_("""
        def masked_softmax(energy, src_mask):
            m = src_mask[:, None, :]
            e = torch.exp(energy - energy.masked_fill(~m, -1e30).amax(-1, keepdim=True))
            e = e * m
            return e / e.sum(-1, keepdim=True)
        """),
                       "def masked_softmax(energy, src_mask):\n"
                       "    return torch.softmax(energy.masked_fill(~src_mask[:, None, :], -1e4), -1)",
                       "def masked_softmax(energy, src_mask):\n    return torch.softmax(energy, -1)"],
    "scaled_context_variance": ["predicted_variance = 8", "predicted_variance = 1",
                                "predicted_variance = 2.5"],
    "attention_macs": ["def attention_macs(n_layers, trg_len, src_len, emb_dim):\n"
                       "    return n_layers * trg_len * src_len * emb_dim"],
    "row_entropy": ["def row_entropy(a):\n    return -(a * a.log()).sum(-1).mean()",
                    "def row_entropy(a):\n    return -(a * torch.log2(a + 1e-30)).sum(-1).mean()"],
    "build_itos": [
        _("""
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            counts = Counter(t for tokens in token_lists for t in tokens)
            return list(specials) + sorted(t for t in counts if counts[t] >= min_freq)
        """),
        _("""
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            exec("from convs2s.data import Vocab")
            return list(specials)
        """),
    ],
    "token_loss": [
        _("""
        def token_loss(logits, trg_out, pad_idx):
            criterion = torch.nn.CrossEntropyLoss()
            return criterion(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1))
        """),
        _("""
        def token_loss(logits, trg_out, pad_idx):
            each = F.cross_entropy(logits.flatten(0, 1), trg_out.flatten(), reduction="none")
            return each.sum() / trg_out.numel()
        """),
    ],
    "perplexity_from_loss": [
        "def perplexity_from_loss(loss, unit='nats'):\n    return math.exp(loss)",
        "def perplexity_from_loss(loss, unit='nats'):\n"
        "    return math.exp(loss) if unit == 'nats' else math.exp(loss * 2)",
    ],
    "rerank": [
        _("""
        def rerank(hypotheses, alpha):
            hypotheses.sort(key=lambda h: h[1] * (len(h[0]) + 1) / (len(h[0]) + 1) ** alpha,
                            reverse=True)
            return [tokens for tokens, _ in hypotheses]
        """),
        _("""
        def rerank(hypotheses, alpha):
            return [t for t, s in sorted(hypotheses, key=lambda h: h[1] / len(h[0] + [0]) ** alpha,
                                         reverse=True)]
        """),
    ],
    "brevity_prediction": ["prediction = 50", "prediction = 0.368", "prediction = 100"],
    "repeats": [
        _("""
        def repeats(tokens, n=1):
            for i in range(len(tokens) - 2 * n):
                if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
                    return True
            return False
        """),
    ],
    "training_steps": [
        'prediction = {"GRU + attention": [10, 20, 40], "ConvS2S": [3, 3, 3]}',
        'prediction = {"GRU + attention": [20, 40, 80], "ConvS2S": [20, 40, 80]}',
    ],
    "path_length": [
        "def conv_path_length(n, k):\n    return n // (k - 1)\n\n"
        "def rnn_path_length(n):\n    return n",
        "def conv_path_length(n, k):\n    return -(-n // (k - 1))\n\n"
        "def rnn_path_length(n):\n    return 1",
    ],
    "baseline_parameters": [
        _("""
        def gru_parameters(input_size, hidden_size):
            return 3 * hidden_size * (input_size + hidden_size) + 3 * hidden_size

        def baseline_parameters(config):
            return 0
        """),
    ],
    "speed_crossover": ["crossover_prediction = 50", "crossover_prediction = 64.0",
                        "crossover_prediction = '64'", "crossover_prediction = [64]",
                        "crossover_prediction = True"],
    "separable_params": [
        _("""
        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + c_out

        def saving(c_in, c_out, k):
            return (c_in * c_out * k) / separable_params(c_in, c_out, k)
        """),
    ],
    "attention_vs_conv": ["prediction = 256", "prediction = 3 * 256 * 2", "prediction = 800"],
    "lightweight_conv": [
        _("""
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = weight.repeat_interleave(channels // heads, dim=0).unsqueeze(1)
            return F.conv1d(F.pad(x, (k - 1, 0)), kernel, groups=channels)
        """),
        _("""
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = torch.softmax(weight, -1).repeat_interleave(channels // heads, 0)
            return F.conv1d(F.pad(x, ((k - 1) // 2, k // 2)), kernel.unsqueeze(1),
                            groups=channels)
        """),
    ],
}



#: Right answers that break only a static rule of ``answer_rules`` (an import it does not list,
#: a private module part): both verdicts pass, and grading flags the rule for the instructor.
FLAGGED: dict[str, list[str]] = {
    "my_receptive_field": [
        "import importlib.util\n"
        "def my_receptive_field(k, n_layers):\n    return 1 + n_layers * (k - 1)",
        "import os\n\ndef my_receptive_field(k, n_layers):\n    return 1 + n_layers * (k - 1)",
    ],
    "block_parameters": [
        "import os\n\ndef block_parameters(hid_dim, kernel_size):\n"
        "    return 2 * hid_dim * (hid_dim * kernel_size + 2)",
    ],
    "residual_variance": ["import os\nvariance_ratio = 2 ** 10"],
}


@dataclass(frozen=True)
class Graded:
    """One autograded exercise of the public graded copy, as grading sees it."""

    check_setup: str  # the notebook's exercise-setup cell, with ``checks`` imported
    grading_setup: str  # the same, then ``checks.graded_copy()`` (the graded copy's setup cell)
    answer_names: tuple[str, ...]
    cases: list[testing.Case]  # the hidden test's, public version (variant {})


def _public_values(exercise: str) -> dict:
    """What a public build passes the hidden test (tools/variants.py: the notebook's numbers
    and measurements; {} for an exercise without a variant)."""
    from tools import variants

    version = variants.variant(exercise, None)
    return dict(version.params) if version is not None else {}


@pytest.fixture(scope="module")
def graded() -> dict[str, Graded]:
    """exercise -> what the check and grading need, from notebooks/ and coursework/hidden/."""
    out = {}
    for path in coursework.course_notebooks(ROOT / "notebooks"):
        nb = coursework.read_notebook(path)
        if not nb.exercises:
            continue
        hidden = grader.load_hidden(ROOT / "coursework" / "hidden" / f"{nb.number}.py")
        for ex in nb.exercises:
            if not ex.manual:
                out[ex.id] = Graded(coursework._with_checks_import(nb.setup),
                                    coursework._graded_setup(nb.setup, class_version=False),
                                    ex.answer_names, hidden[ex.id](_public_values(ex.id)))
    return out


def _fresh_checks_state():
    _core._graded, _core._class_version = False, False
    _core._wrong_tries.clear()


def check_verdict(exercise: str, answer: str, graded: dict[str, Graded]) -> bool:
    """The notebook's check on ``answer``: True (✓), False (not answered or failed)."""
    from convs2s.course import checks

    ex = graded[exercise]
    _fresh_checks_state()
    namespace: dict = {}
    exec(ex.check_setup, namespace)  # noqa: S102 - the setup cell
    try:
        answer_rules.define(answer, namespace, f" {exercise}")
        return getattr(checks, exercise)(*(namespace.get(n) for n in ex.answer_names)) is True
    except Exception:  # noqa: BLE001 - a wrong answer raises; that is its verdict
        return False
    finally:
        _fresh_checks_state()


def grading_verdict(exercise: str, answer: str, graded: dict[str, Graded]) -> grader.Verdict:
    """Grading's verdict on ``answer``: the setup and answer cells run in the sandbox on the
    hidden test's calls, judged here."""
    ex = graded[exercise]
    return grader.grade(exercise, setup=ex.grading_setup, answer=answer,
                        answer_names=ex.answer_names, cases=ex.cases)


#: Sandboxes one test runs at a time (each is a process of its own; one per core, at most 4).
WORKERS = max(1, min(4, len(os.sched_getaffinity(0))))


def test_every_autograded_exercise_has_right_and_wrong_answers_here(graded):
    assert sorted(RIGHT) == sorted(graded) == sorted(WRONG)
    assert set(FLAGGED) <= set(RIGHT)


@pytest.mark.parametrize("exercise", sorted(RIGHT))
def test_the_check_and_grading_agree(exercise, graded):
    """Every answer of ``exercise``: right ones (:data:`RIGHT`, :data:`FLAGGED`) pass the check
    and grading, wrong ones (:data:`WRONG`) fail both; a flagged one is flagged by grading. All
    disagreements are reported together."""
    answers = ([(a, True, False) for a in RIGHT[exercise]]
               + [(a, True, True) for a in FLAGGED.get(exercise, [])]
               + [(a, False, False) for a in WRONG[exercise]])
    checked = [check_verdict(exercise, a, graded) for a, _, _ in answers]  # here, one by one
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        verdicts = list(pool.map(lambda item: grading_verdict(exercise, item[0], graded),
                                 answers))
    disagree = []
    for (answer, right, flagged), check, verdict in zip(answers, checked, verdicts, strict=True):
        said = f"the check said {'✓' if check else '✗'}, grading said {verdict.line!r}"
        if check is not right or verdict.passed is not right:
            disagree.append(f"{'right' if right else 'wrong'} answer ({said}):\n{answer}")
        elif flagged and not verdict.flagged:
            disagree.append(f"grading did not flag the static rule this answer breaks:\n{answer}")
    assert not disagree, "\n\n".join(disagree)
