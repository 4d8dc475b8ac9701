"""ConvS2S: the full encoder-decoder model of Gehring et al. (2017).

``logits, attention = model(src, trg_in)`` is ``model.decode(trg_in, model.encode(src))``.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, replace

from torch import Tensor, nn

from convs2s.model.decoder import Decoder, IncrementalState
from convs2s.model.encoder import Encoder, EncoderOut
from convs2s.model.layers import BLOCK_PADDINGS, INITS
from convs2s.system.arguments import (
    check_bool,
    check_choice,
    check_fraction,
    check_token_id,
    check_whole,
)

#: The fields a configuration takes from the vocabularies: None in a preset, filled by
#: :meth:`ConvS2SConfig.with_vocabularies` before a model is built.
VOCABULARY_FIELDS = ("src_vocab_size", "trg_vocab_size", "src_pad_idx", "trg_pad_idx")

#: Old names of fields, which saved configurations (checkpoints, the shipped models, recorded
#: presets) may still hold: {old name: current name}. :func:`current_names` reads them.
RENAMED_FIELDS = {"encoder_grad_scale": "scale_encoder_gradients"}


@dataclass(frozen=True)
class ConvS2SConfig:
    """Every option of a :class:`ConvS2S` model, checked when the configuration is made.

    Fields:
        src_vocab_size, trg_vocab_size: vocabulary sizes.
        emb_dim: embedding size (also the space of attention and of z).
        hid_dim: channels of the convolutions.
        enc_layers, dec_layers: number of convolutional blocks in encoder and decoder.
        kernel_size: convolution width k (odd, because the encoder pads (k-1)/2 on each side).
            With L layers a decoder position sees L·(k-1) + 1 tokens.
        dropout: dropout probability (embeddings, every block input, before the output layer).
        max_positions: number of learned position embeddings, i.e. the longest source and the
            longest decoder input the model accepts (longer ones raise ValueError).
        src_pad_idx, trg_pad_idx: padding tokens (pad on the right).
        decoder_padding: ``"causal"`` (correct) or ``"same"`` (the cheating decoder that sees
            the future; for the course's demonstration only).
        weight_norm: weight-normalise every linear and convolutional layer (not embeddings),
            as the paper and fairseq do. Adds one parameter per output unit.
        init: ``"paper"`` (§3.5: embeddings N(0, 0.1²), N(0, p/n) weights, 4x for layers
            feeding a GLU, zero biases) or ``"pytorch"`` (PyTorch's defaults, as in most
            tutorials).
        scale_encoder_gradients: whether to scale the gradient that flows into the encoder's
            convolution stack by 1/(2·dec_layers) (§3.4; fairseq's factor). Each of the
            dec_layers attentions uses z twice, as keys and inside the values z + e, so the
            encoder otherwise gets 2·dec_layers gradient contributions; the paper found it
            "received too much gradient". Forward outputs are identical either way.
        share_input_output_embed: use the decoder's token embedding as its output layer's
            weight (fairseq's option of the same name; not in the paper, off by default). See
            :class:`convs2s.model.decoder.Decoder`.

    The vocabulary fields (:data:`VOCABULARY_FIELDS`) may be None: a training preset cannot
    know them before the data is read. ``config.with_vocabularies(src_vocab, trg_vocab)``
    fills them; :class:`ConvS2S` refuses a configuration that still lacks one.

    Every field is checked in one line naming it: a wrong type is a ``TypeError``
    (``weight_norm="no"``, ``dropout="0.1"``, ``emb_dim=8.0``; bools must be
    ``True``/``False``), a value out of range or not among the choices a ``ValueError``.
    """

    src_vocab_size: int | None = None
    trg_vocab_size: int | None = None
    _: KW_ONLY
    emb_dim: int = 256
    hid_dim: int = 512
    enc_layers: int = 10
    dec_layers: int = 10
    kernel_size: int = 3
    dropout: float = 0.25
    max_positions: int = 128
    src_pad_idx: int | None = None
    trg_pad_idx: int | None = None
    decoder_padding: str = "causal"
    weight_norm: bool = True
    init: str = "paper"
    scale_encoder_gradients: bool = True
    share_input_output_embed: bool = False

    def __post_init__(self) -> None:
        """Every field checked (:mod:`convs2s.system.arguments`: a wrong type is refused before
        anything is built, in one line "option=value must be ..."); whole numbers are kept as
        plain ``int`` (what a checkpoint stores)."""
        checked = {}
        for name in ("src_vocab_size", "trg_vocab_size", "emb_dim", "hid_dim", "enc_layers",
                     "dec_layers", "kernel_size", "max_positions"):
            value = getattr(self, name)
            if value is not None or name not in VOCABULARY_FIELDS:
                checked[name] = check_whole(value, name)
        check_fraction(self.dropout, "dropout")
        for name in ("weight_norm", "scale_encoder_gradients", "share_input_output_embed"):
            check_bool(getattr(self, name), name)
        check_choice(self.decoder_padding, "decoder_padding", BLOCK_PADDINGS)
        check_choice(self.init, "init", INITS)
        for side in ("src", "trg"):
            pad_idx = getattr(self, f"{side}_pad_idx")
            if pad_idx is not None:
                checked[f"{side}_pad_idx"] = check_token_id(
                    pad_idx, f"{side}_pad_idx", checked.get(f"{side}_vocab_size"))
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    def with_vocabularies(self, src_vocab, trg_vocab) -> ConvS2SConfig:
        """This configuration for these vocabularies: their sizes (``len``) and padding ids
        (``pad_idx``; e.g. two :class:`convs2s.data.Vocab`)."""
        return replace(self, src_vocab_size=len(src_vocab), trg_vocab_size=len(trg_vocab),
                       src_pad_idx=src_vocab.pad_idx, trg_pad_idx=trg_vocab.pad_idx)

    def missing(self) -> list[str]:
        """The vocabulary fields still None (empty for a configuration a model can use)."""
        return [name for name in VOCABULARY_FIELDS if getattr(self, name) is None]

    def as_dict(self) -> dict:
        """The fields as a plain dict: what ``ConvS2S.config`` holds and checkpoints store."""
        return asdict(self)


class ConvS2S(nn.Module):
    """Convolutional sequence-to-sequence model.

    ``ConvS2S(config)`` builds the model a :class:`ConvS2SConfig` describes;
    ``ConvS2S(src_vocab_size, trg_vocab_size, src_pad_idx=..., trg_pad_idx=..., emb_dim=...)``
    (the configuration's fields as arguments) is the same. A configuration without its
    vocabulary fields (a preset's) is refused in one line.

    Every layer has the same width: the embeddings and z have ``emb_dim`` channels, every
    convolution ``hid_dim`` channels and the same ``kernel_size``, so each residual connection
    adds tensors of one size. fairseq's ``fconv`` also allows a width and a kernel size per
    layer, with a linear projection on the residual where the width changes; the paper's WMT
    models use that (fairseq's ``fconv_wmt_en_de``: nine layers of 512 channels, four of 1,024,
    then two of 2,048 with kernel width 1). This model does not.

    The defaults ``weight_norm=True, init="paper", scale_encoder_gradients=True`` are fairseq's
    ``fconv`` settings, i.e. the paper's, so that the default model is the paper's model; they
    are not tuned on Multi30k (``benchmarks/train_choices.py`` compares the initialisations
    there; its figures are in ``benchmarks/RESULTS.md``).

    The sizes (256/512, 10+10 layers, kernel 3, dropout 0.25) are those of the PyTorch tutorial
    on Multi30k (bentrevett/pytorch-seq2seq), so results can be compared with it. With the
    same vocabularies this model has more parameters than the tutorial reports, because the
    tutorial's decoder shares one pair of attention projections across all layers, where the
    paper gives each layer its own (``tests/model/test_convs2s_model.py`` derives the count
    layer by layer).

    ``config`` is the configuration as a plain dict (:meth:`ConvS2SConfig.as_dict`), so
    ``ConvS2S(**model.config)`` rebuilds the architecture (e.g. from a checkpoint that stores
    ``config`` next to the ``state_dict``).
    """

    def __init__(self, config: ConvS2SConfig | int | None = None,
                 trg_vocab_size: int | None = None, /, **fields) -> None:
        super().__init__()
        c = _configuration(config, trg_vocab_size, fields)
        self.config = c.as_dict()  # a plain dict: what checkpoints store
        shared = dict(
            emb_dim=c.emb_dim,
            hid_dim=c.hid_dim,
            kernel_size=c.kernel_size,
            dropout=c.dropout,
            max_positions=c.max_positions,
            weight_norm=c.weight_norm,
            init=c.init,
        )
        self.encoder = Encoder(
            c.src_vocab_size,
            n_layers=c.enc_layers,
            pad_idx=c.src_pad_idx,
            grad_scale=1.0 / (2.0 * c.dec_layers) if c.scale_encoder_gradients else 1.0,
            **shared,
        )
        self.decoder = Decoder(
            c.trg_vocab_size,
            n_layers=c.dec_layers,
            pad_idx=c.trg_pad_idx,
            padding=c.decoder_padding,
            share_input_output_embed=c.share_input_output_embed,
            **shared,
        )

    def encode(self, src: Tensor) -> EncoderOut:
        """Encode ``src = [batch, src_len]`` (right-padded token ids)."""
        return self.encoder(src)

    def decode(
        self,
        trg_in: Tensor,
        encoded: EncoderOut,
        incremental_state: IncrementalState | None = None,
        output_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Decoder pass; see :class:`convs2s.model.decoder.Decoder` for incremental decoding and
        ``output_mask``."""
        return self.decoder(trg_in, encoded, incremental_state, output_mask)

    def forward(self, src: Tensor, trg_in: Tensor, *,
                output_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(logits [batch, trg_len, trg_vocab], attention [batch, dec_layers, trg_len,
        src_len])`` for right-padded ``src`` and decoder input ``trg_in`` (<bos> + target
        without its last token). With ``output_mask`` (``[batch, trg_len]`` bool), logits only
        where it is True: ``[n_true, trg_vocab]`` (what training uses; see
        :func:`convs2s.model.loss.next_token_loss`)."""
        return self.decode(trg_in, self.encode(src), output_mask=output_mask)


def current_names(fields: dict) -> dict:
    """``fields`` (a configuration's: keyword arguments, a checkpoint's ``model_config``, a
    recorded preset) with each old name of :data:`RENAMED_FIELDS` replaced by the current one,
    so that a configuration saved under an old name still loads. ``TypeError`` (one line) if
    both names are given."""
    out = {}
    for name, value in fields.items():
        new = RENAMED_FIELDS.get(name, name) if isinstance(name, str) else name
        if new != name and new in fields:
            raise TypeError(f"{name} is the old name of {new}: give one of them, not both.")
        out[new] = value
    return out


def _configuration(config, trg_vocab_size, fields: dict) -> ConvS2SConfig:
    """The complete :class:`ConvS2SConfig` that ``ConvS2S(...)``'s arguments describe (old
    field names read as :func:`current_names` reads them)."""
    if isinstance(config, ConvS2SConfig):
        if trg_vocab_size is not None or fields:
            raise TypeError("ConvS2S takes a ConvS2SConfig or its fields, not both: change a "
                            "configuration with dataclasses.replace(config, ...).")
    else:
        sizes = (config, trg_vocab_size) if trg_vocab_size is not None else \
            (config,) if config is not None else ()
        config = ConvS2SConfig(*sizes, **current_names(fields))
    missing = config.missing()
    if missing:
        raise ValueError(f"The model configuration lacks {', '.join(missing)}: complete it with "
                         "config.with_vocabularies(src_vocab, trg_vocab).")
    return config


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
