"""Greedy decoding with each incremental step run through ``torch.compile`` (this course's
engineering option, not the paper's): :func:`compiled_greedy_decode`.

The loop is :func:`convs2s.model.search.greedy_loop`, the very loop of eager greedy decoding (the
<eos> bookkeeping and the check that every sentence has ended stay in Python); only its step
differs: one compiled function from the new token to the next one (:func:`decoder_step`, then
the argmax without <pad>/<bos>). Its inputs and outputs keep their shapes from step to step, so
that under CUDA graphs (``"reduce-overhead"``) a step is one recorded graph replayed instead of
dozens of kernel launches. It gives the same tokens as eager decoding
(``tests/run/test_compiled_decoding.py``).

What a compiled step needs that the model does not:

- :func:`decoder_step`: the decoder's incremental step in static shapes (the position as a
  tensor, the cache of all layers as one tensor, full from the start);
- :func:`_plain_weights`: a twin of the decoder whose weight-normed weights are plain tensors,
  so that the compiled step neither recomputes them nor sees new tensors at every call;
- no "duck sizing" (``torch.fx.experimental._config``, a private torch module): torch.compile
  would otherwise assume that sizes equal in the first batch (as many sentences as source
  positions) are always equal, and compile again for the first batch where they are not.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable

import torch
from torch import Tensor
from torch.fx.experimental import _config as fx_config
from torch.nn.utils import parametrize

from convs2s.model.convs2s import ConvS2S
from convs2s.model.decoder import Decoder
from convs2s.model.encoder import EncoderOut
from convs2s.model.search import StepFn, greedy_loop
from convs2s.system.compiling import (
    COMPILE_MODES,
    CUDA_GRAPH_MODES,
    check_compiler,
    check_mode,
)


def compiled_greedy_decode(model: ConvS2S, src: Tensor, *, mode: str, max_len: int,
                           bos_idx: int, eos_idx: int, pad_idx: int | None = None,
                           return_attention: bool = False):
    """:func:`convs2s.model.search.greedy_decode` (incremental), each step compiled in ``mode``.

    Args:
        model, src, max_len, bos_idx, eos_idx, pad_idx, return_attention: as for
            :func:`~convs2s.model.search.greedy_decode`; ``model`` needs a ConvS2S decoder
            with causal padding (whose step :func:`decoder_step` computes).
        mode: one of :data:`convs2s.system.compiling.COMPILE_MODES`. The first call compiles
            (seconds to a minute); later calls reuse the compiled step, whatever their batch
            size and source length.

    Returns:
        ``tokens``, or ``(tokens, attentions)``: the same as ``greedy_decode``'s.
    """
    _check_compile(model, mode, src.device)

    def steps(encoded: EncoderOut, banned: list[int]) -> StepFn:
        return _compiled_steps(model.decoder, encoded, banned, mode,
                               keep_attention=return_attention)

    with fx_config.patch(use_duck_shape=False):  # see the module's docstring
        return greedy_loop(model, src, steps, max_len=max_len, bos_idx=bos_idx,
                           eos_idx=eos_idx, pad_idx=pad_idx, return_attention=return_attention)


def start_histories(decoder: Decoder, batch: int, like: Tensor) -> Tensor:
    """:func:`decoder_step`'s cache at the start of a sentence: ``[n_layers, batch, hid_dim,
    k-1]`` zeros (what the causal padding gives), of ``like``'s dtype and device."""
    block = decoder.blocks[0]
    return like.new_zeros(len(decoder.blocks), batch, block.hid_dim, block.kernel_size - 1)


def decoder_step(decoder: Decoder, tokens: Tensor, position: Tensor, histories: Tensor,
                 encoder_out: EncoderOut) -> tuple[Tensor, Tensor, Tensor]:
    """One step of incremental decoding in static shapes, for a compiled decoding loop.

    The same computation as ``decoder(tokens, encoder_out, incremental_state)`` for one new
    token, but every input and output is a tensor whose shape is the same at every step (CUDA
    graphs replay one recorded shape, and a Python int would be compiled into the graph): the
    position is a tensor, and the cache is one tensor of all layers' last k-1 inputs, already
    full at the start (:func:`start_histories`). No input checks: the caller's.

    Args:
        tokens: ``[batch, 1]``, the new token of every sentence.
        position: ``[1]`` long tensor, its position (0 for <bos>).
        histories: ``[n_layers, batch, hid_dim, k-1]``, the cache before this step.
        encoder_out: :class:`convs2s.model.encoder.EncoderOut`.

    Returns ``(logits [batch, vocab_size], attention [batch, n_layers, src_len],
    histories [n_layers, batch, hid_dim, k-1])``: the cache after this step.
    """
    g = decoder.tok_embedding(tokens) + decoder.pos_embedding(position)  # g = [batch, 1, emb]
    g = decoder.dropout(g)
    x = decoder.emb2hid(g).transpose(1, 2)  # x = [batch, hid_dim, 1]
    x, attention, new_histories = decoder.layers(x, g, encoder_out, histories.unbind(0))
    out = decoder.dropout(decoder.hid2emb(x.transpose(1, 2)))  # out = [batch, 1, emb_dim]
    logits = decoder.fc_out(out)  # logits = [batch, 1, vocab_size]
    return logits[:, 0], attention[:, :, 0], torch.stack(new_histories)


def _greedy_step(decoder: Decoder, tokens: Tensor, position: Tensor, histories: Tensor,
                 encoded: EncoderOut, banned: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One greedy step, the function torch.compile compiles: :func:`decoder_step`, then the
    argmax with the ``banned`` tokens (a ``[vocab]`` bool mask) at −inf, as eager decoding."""
    logits, attention, histories = decoder_step(decoder, tokens, position, histories, encoded)
    next_token = logits.masked_fill(banned, float("-inf")).argmax(dim=-1)  # [batch]
    return next_token, attention, histories


_COMPILED: dict[str, Callable] = {}  # mode -> torch.compile(_greedy_step, mode=mode)


def _compiled_steps(decoder: Decoder, encoded: EncoderOut, banned: list[int], mode: str,
                    *, keep_attention: bool) -> StepFn:
    """The steps of greedy decoding, each one call of :func:`_greedy_step` compiled in
    ``mode`` (compiled once per mode, for every batch size and source length:
    ``dynamic=True``).

    Everything the compiled function takes and returns has the same shape at every step:
    the new token ``[batch, 1]``, its position as a ``[1]`` tensor (not a Python int, which
    would be compiled into the graph, once per position), the cache of every layer's last
    k-1 convolution inputs as one ``[dec_layers, batch, hid_dim, k-1]`` tensor (full from the
    start: the causal padding's zeros), the encoder output, the banned tokens as a mask.
    Under CUDA graphs each step's outputs are overwritten by the next replay, so the cache
    (and the attention, if kept) are cloned before it (one small copy each).
    The decoder's weights: see :func:`_plain_weights`."""
    step_fn = _COMPILED.get(mode)
    if step_fn is None:
        step_fn = _COMPILED[mode] = torch.compile(_greedy_step, mode=mode, dynamic=True,
                                                  fullgraph=True)  # one graph: no break
    plain = _plain_weights(decoder)
    device = encoded.src_mask.device
    graphs = mode in CUDA_GRAPH_MODES and device.type == "cuda"
    banned_mask = torch.zeros(decoder.vocab_size, dtype=torch.bool, device=device)
    banned_mask[banned] = True
    position = torch.zeros(1, dtype=torch.long, device=device)  # [1]: of the new tokens
    histories = start_histories(plain, encoded.src_mask.size(0), encoded.conved)
    tokens = None  # the new tokens, [batch, 1]: contiguous (trg[:, -1:]'s strides change)

    def next_step(trg: Tensor) -> tuple[Tensor, Tensor]:
        nonlocal histories, tokens
        if tokens is None:
            tokens = trg[:, -1:].contiguous()
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        next_token, attention, histories = step_fn(plain, tokens, position, histories, encoded,
                                                   banned_mask)
        position.add_(1)  # in place; not a view of a tensor of positions (guarded by its base)
        tokens = next_token.unsqueeze(1)
        if graphs:  # the outputs the next replay needs or overwrites
            tokens, histories = tokens.clone(), histories.clone()
            next_token = tokens[:, 0]
            attention = attention.clone() if keep_attention else attention
        return next_token, attention

    return next_step


# decoder -> its twin with plain weights (weakly held: a twin lives as long as its decoder)
_PLAIN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plain_weights(decoder: Decoder) -> Decoder:
    """``decoder`` itself if none of its weights is weight-normed; else its twin whose weights
    are plain tensors holding what the decoder's are now (W = g·v/‖v‖, computed once).

    Inside a compiled step a weight-normed weight would be computed again at every step
    (3 times the weight memory traffic), or, read from ``parametrize.cached()``, would be a
    new tensor at every call, which torch.compile guards on (it compiled again) and CUDA
    graphs record anew. So the twin is made once per decoder and kept (weakly, for as long
    as the decoder lives), and each call copies the current weights into it in place: its
    tensors keep their addresses, and follow the decoder's training. Costs one more copy of
    the decoder's weights in memory."""
    if not any(parametrize.is_parametrized(m) for m in decoder.modules()):
        return decoder
    twin = _PLAIN.get(decoder)
    if twin is None or not all(_same_layout(p, _attribute(decoder, name))
                               for name, p in twin.named_parameters()):
        twin = copy.deepcopy(decoder).eval()  # a new twin: the first call, or a moved decoder
        for module in twin.modules():
            if parametrize.is_parametrized(module):
                _unparametrize(module)
        _PLAIN[decoder] = twin.requires_grad_(False)
    with torch.no_grad():
        for name, p in twin.named_parameters():
            p.copy_(_attribute(decoder, name))  # a weight-normed one: g·v/‖v‖ (once, cached)
    return twin


def _unparametrize(module: torch.nn.Module) -> None:
    """``module`` (a deep copy) as its class before parametrization, each parametrized tensor
    a plain parameter holding its current value. Not ``parametrize.remove_parametrizations``:
    a deep copy shares its original's parametrized class, from which that function deletes
    the properties, and the original would lose its weights."""
    values = {name: getattr(module, name) for name in module.parametrizations}
    module.__class__ = parametrize.type_before_parametrizations(module)  # this object only
    del module.parametrizations
    for name, value in values.items():
        module.register_parameter(name, torch.nn.Parameter(value.detach().clone()))


def _same_layout(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device


def _attribute(module: torch.nn.Module, dotted: str) -> Tensor:
    """``module``'s tensor at ``dotted`` (``"blocks.0.conv.weight"``), a parametrized one
    computed."""
    path, _, name = dotted.rpartition(".")
    return getattr(module.get_submodule(path), name)


def _check_compile(model: ConvS2S, mode, device: torch.device) -> None:
    """A ``ValueError`` line unless :func:`compiled_greedy_decode` can compile ``model``'s
    steps in ``mode`` on ``device``."""
    if mode is None:
        raise ValueError(f"mode must be one of {', '.join(COMPILE_MODES)}: for eager steps, "
                         "use convs2s.model.search.greedy_decode.")
    check_mode(mode)
    decoder = getattr(model, "decoder", None)
    if not isinstance(decoder, Decoder):
        raise ValueError("compile needs a ConvS2S decoder (convs2s.model.decoder.Decoder), "
                         f"and {type(model).__name__}'s is a {type(decoder).__name__}.")
    if decoder.padding != "causal":
        raise ValueError("compile needs a decoder that decodes incrementally "
                         f"(padding='causal'), not padding={decoder.padding!r}.")
    check_compiler(device, "decode without compile")
