"""The course's shipped translator in the reader's browser (issues 38 and 47): what ``make site``
writes into ``_static/translator/`` for notebook 06's page (``static/translator.js`` runs it).

- Each model the page offers is listed in :data:`MODELS` (a ``convs2s.pretrained`` name, such as
  ``"de-en"``, how its weights are stored and the sentence its box starts with); its files lie
  under ``<name>/`` and the page loads only the direction the reader asks for (a menu of
  directions: switching to another loads that one's files, once). Today: the shipped de-en
  model, the checkpoint notebook 06 studies, and the shipped en-de one.
- The model is exported to ONNX as two graphs with torch's exporter: the encoder
  (``src [1, src_len]`` -> ``conved``, ``combined``) and one step of the *incremental* decoder,
  as the package decodes (``convs2s.model.decoder``'s incremental state): the new token of each
  hypothesis (``tokens [beam, 1]``), its position, the encoder's outputs and every decoder
  layer's last k-1 convolution inputs (``history<i> [beam, hid, k-1]``) in; the next token's
  logits, every layer's attention and the updated histories (``next<i>``) out. A step costs
  the same at position 50 as at position 1; the page reorders the histories as beam search
  reorders its hypotheses.
- Weights (``MODELS[name]["weights"]``, what the page downloads; :func:`chosen_weights`):

  - ``"float16"``: stored as float16, as the shipped checkpoint stores them, and cast to
    float32 when the page loads the model, so the page computes in float32 from the same
    numbers as the package (the export refuses a weight that float16 would change); its
    translations are the package's. The float16 tensors travel outside the ONNX files, in one
    file per model (ONNX "external data") whose bytes are split into two planes (every
    tensor's low bytes, then its high bytes: the high bytes hold sign and exponent and
    compress to less than half), which gzip squeezes 8% more than the ONNX file itself.
  - ``"int8"`` (this course's choice for both directions, issue 63): every matrix quantised to
    int8 with one float32 scale per output channel (embedding rows included;
    ``DequantizeLinear`` nodes that onnxruntime folds into float32 weights when the page loads
    the model), biases and position embeddings as float16: about 6 MB less to download. The
    page then computes with other numbers than ``convs2s.pretrained``: the same as the package
    running the dequantised weights (:func:`page_package`), which is what the tests compare the
    page with. It ships only where the site's build measured, on the graphs the page runs
    (``translator_quality``: the Multi30k validation split, greedy and beam 5, sacreBLEU), that
    it scores at most ``MAX_BLEU_DROP`` below the float16 graphs; else the float16 weights ship
    and the record says why. Each model's record of that measurement (``"quality"``) is in the
    manifest, and the page shows its figures.

- Every file is gzip-compressed (the page inflates it with the browser's
  ``DecompressionStream``): the page fetches it as binary when it is served over http(s), and,
  opened from disk (``file://``, where ``fetch`` is not allowed and modules may not be
  imported), loads the same bytes base64-encoded in classic scripts of ``CHUNK_BYTES`` each
  (``<file>.<i>.js``), one after the other.
- onnxruntime-web (``package.json``, pinned by ``package-lock.json``; ``make site`` installs it
  with ``npm ci``) is vendored: its classic script for the WebAssembly backend, its
  WebAssembly glue and binary (the plain SIMD one, without WebGPU/JSEP: the smallest that
  runs the graphs).
- ``manifest.js`` (a classic script: it loads from disk too) lists the files (their sizes
  before and after gzip, sha256, chunks), the runtime's files, and per model its record,
  decoder shape and pre-translated examples for a browser without WebAssembly;
  ``<name>/tokenizer.json.gz`` holds the sentencepiece pieces and scores (the page's
  tokenizer).

Nothing here is loaded until the reader turns to the translator (puts the cursor in its box, or
presses its button), so the other pages, and notebook 06's page until then, weigh what they
weighed before; the page then fetches the files and makes its onnxruntime sessions while the
reader types.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import gzip
import hashlib
import json
import tempfile
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
NODE_MODULES = SITE_DIR / "node_modules"
PACKAGE_LOCK = SITE_DIR / "package-lock.json"
ORT_PACKAGE = "onnxruntime-web"
#: onnxruntime-web's files the page uses: the classic (non-module) script for the WebAssembly
#: backend, the Emscripten glue it imports, and the WebAssembly binary (SIMD, no JSEP/WebGPU).
ORT_SCRIPT = "ort.wasm.min.js"
ORT_GLUE = "ort-wasm-simd-threaded.mjs"
ORT_WASM = "ort-wasm-simd-threaded.wasm"
#: The models the page offers: a ``convs2s.pretrained`` name -> how the site ships it. The
#: page's menu of directions lists them in this order, the first chosen unless its element
#: names another (``data-model``); ``sentence`` is the sentence its box starts with (notebook
#: 06's widget starts with the same: ``convs2s.course.analysis.WIDGET_SENTENCES``). Another
#: direction is one more entry (its files go under ``<name>/``; the page loads only the ones
#: the reader asks for).
MODELS = {
    "de-en": {"weights": "int8", "sentence": "Ein kleiner Hund spielt im Schnee."},
    "en-de": {"weights": "int8", "sentence": "A little dog is playing in the snow."},
}
WEIGHTS = ("float16", "int8")
#: Bytes of (gzip-compressed) file per chunk script for a page opened from disk (about 1.4 MB
#: of base64): small steps for the progress bar.
CHUNK_BYTES = 1 << 20
#: The file of a model's float16 weights, as its ONNX graphs name it (external data).
WEIGHTS_FILE = "weights.bin"
#: Initializers with fewer elements stay inside the ONNX file.
EXTERNAL_MIN_ELEMENTS = 4096
#: Sentences the page translates without WebAssembly (pre-translated here by the package), per
#: model: the sentence notebook 06's widget starts with, then the first validation sentences.
DEFAULT_SENTENCE = MODELS["de-en"]["sentence"]
FALLBACK_EXAMPLES = 6
OPSET = 20


class TranslatorAssetError(Exception):
    """What stops the build from writing the translator's files: one line saying what to do."""


def locked_version(package: str = ORT_PACKAGE, lock: Path = PACKAGE_LOCK) -> str:
    """The version of ``package`` that ``package-lock.json`` pins."""
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
        return data["packages"][f"node_modules/{package}"]["version"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TranslatorAssetError(f"{lock} does not pin {package} ({e}): restore the "
                                   "committed lock file") from None


def ort_files(node_modules: Path = NODE_MODULES) -> dict[str, Path]:
    """onnxruntime-web's three files, from the version the lock file pins."""
    want = locked_version()
    folder = node_modules / ORT_PACKAGE
    try:
        have = json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        have = None
    if have != want:
        found = f"version {have} is installed" if have else "it is not installed"
        raise TranslatorAssetError(
            f"the site vendors {ORT_PACKAGE} {want} (tools/site/package-lock.json), but {found} "
            "in tools/site/node_modules: run `make site` (it runs `npm ci` there)")
    return {name: folder / "dist" / name for name in (ORT_SCRIPT, ORT_GLUE, ORT_WASM)}


# --------------------------------------------------------------------------------------------
# The model as ONNX
# --------------------------------------------------------------------------------------------


def _graphs(model):
    """The two modules the page runs, for one sentence (without padding): the encoder, and one
    step of the incremental decoder (the package's ``Decoder.forward`` with an incremental
    state, written out so that the state is the graph's inputs and outputs)."""
    import torch

    from convs2s.model.encoder import EncoderOut
    from convs2s.model.layers import RESIDUAL_SCALE

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, src):  # src = [1, src_len]
            out = self.model.encode(src)
            return out.conved, out.combined  # each [1, src_len, emb_dim]

    class DecoderStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = model.decoder

        def forward(self, tokens, position, conved, combined, *histories):
            # tokens = [beam, 1], the newest token of each hypothesis; position = [1], its
            # position (the tokens before it); conved, combined = [beam, src_len, emb_dim] (one
            # sentence, no padding, repeated once per hypothesis); histories: per layer the last
            # k-1 inputs of its convolution, [beam, hid_dim, k-1] (zeros at the start)
            dec = self.decoder
            mask = torch.ones(conved.shape[:2], dtype=torch.bool)
            encoded = EncoderOut(conved, combined, mask)
            g = dec.tok_embedding(tokens) + dec.pos_embedding(position)  # [beam, 1, emb]
            x = dec.emb2hid(g).transpose(1, 2)  # [beam, hid, 1]
            nexts, attentions = [], []
            for block, attention, history in zip(dec.blocks, dec.attentions, histories,
                                                 strict=True):
                residual = x
                h = block(x, history=history)
                nexts.append(block.next_history(history, x))
                attended, a = attention(h.transpose(1, 2), g, encoded)
                h = (h + attended.transpose(1, 2)) * RESIDUAL_SCALE
                x = (h + residual) * RESIDUAL_SCALE
                attentions.append(a)
            logits = dec.fc_out(dec.hid2emb(x.transpose(1, 2)))  # [beam, 1, vocab]
            # the next token's logits [beam, vocab]; attention [beam, layers, src_len]
            return (logits[:, 0], torch.stack(attentions, dim=1)[:, :, 0], *nexts)

    return Encoder(), DecoderStep()


def decoder_spec(model) -> dict:
    """What the page needs to know of the decoder graph's state."""
    config = model.config
    return {"layers": config["dec_layers"], "hid_dim": config["hid_dim"],
            "history": config["kernel_size"] - 1,
            "inputs": ["tokens", "position", "conved", "combined"] +
                      [f"history{i}" for i in range(config["dec_layers"])],
            "outputs": ["logits", "attention"] + [f"next{i}" for i in range(config["dec_layers"])]}


def _float16_weights(model_proto, skip=frozenset()) -> None:
    """Store every float32 weight of ``model_proto`` as float16, cast back to float32 by a node
    at the graph's start (onnxruntime folds it when the page loads the model). In place; a weight
    that float16 would change is refused (the shipped model's weights are float16 already).
    The initializers named in ``skip`` stay as they are."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model_proto.graph
    kept, casts = [], []
    for init in graph.initializer:
        value = numpy_helper.to_array(init)
        if value.dtype != np.float32 or value.size < 2 or init.name in skip:
            kept.append(init)
            continue
        half = value.astype(np.float16)
        if not np.array_equal(half.astype(np.float32), value):
            raise TranslatorAssetError(f"the weight {init.name} is not float16-exact: the page "
                                       "would compute with other numbers than the package")
        kept.append(numpy_helper.from_array(half, f"{init.name}.float16"))
        casts.append(helper.make_node("Cast", [f"{init.name}.float16"], [init.name],
                                      to=TensorProto.FLOAT, name=f"{init.name}.to_float32"))
    _replace_initializers(graph, kept, casts)


def _replace_initializers(graph, initializers, first_nodes) -> None:
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    nodes = list(first_nodes) + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


def _quantized_model(model):
    """A copy of ``model`` without weight norm (each weight as the package computes it), every
    matrix (linear, convolution, token embedding) quantised to int8 with one scale per output
    channel (row): ``(copy, {id of the weight's values: (int8 values, float32 scales)})``."""
    import torch
    from torch.nn.utils import parametrize

    model = copy.deepcopy(model)
    for module in list(model.modules()):
        if parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
    quantized = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2 or "pos_embedding" in name:
                continue
            flat = p.reshape(p.size(0), -1)
            scale = flat.abs().amax(dim=1) / 127
            scale = torch.where(scale == 0, torch.ones_like(scale), scale)
            q = torch.round(flat / scale[:, None]).clamp(-127, 127).to(torch.int8)
            p.copy_((q.float() * scale[:, None]).reshape(p.shape))  # what the page computes with
            quantized[name] = (q.reshape(p.shape).numpy(), scale.numpy())
    return model, quantized


def _int8_weights(model_proto, quantized: dict) -> None:
    """Replace each float32 initializer of ``model_proto`` that is a quantised matrix (or its
    transpose, as the exporter writes a linear layer's weight) by its int8 values and a
    ``DequantizeLinear`` node; the other float32 ones by float16 (:func:`_float16_weights`)."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model_proto.graph
    kept, nodes = [], []
    for init in graph.initializer:
        value = numpy_helper.to_array(init)
        found = None
        if value.dtype == np.float32 and value.ndim >= 2:
            for q, scale in quantized.values():
                if value.shape == q.shape and np.array_equal(
                        value, (q.astype(np.float32).reshape(len(q), -1) * scale[:, None])
                        .reshape(q.shape)):
                    found = (q, scale, 0)
                elif value.ndim == 2 and value.shape == q.shape[::-1] and np.array_equal(
                        value, (q.astype(np.float32) * scale[:, None]).T):
                    found = (np.ascontiguousarray(q.T), scale, 1)
                if found:
                    break
        if not found:
            kept.append(init)
            continue
        q, scale, axis = found
        kept += [numpy_helper.from_array(q, f"{init.name}.int8"),
                 numpy_helper.from_array(scale.astype(np.float32), f"{init.name}.scale")]
        nodes.append(helper.make_node("DequantizeLinear", [f"{init.name}.int8",
                                                           f"{init.name}.scale"],
                                      [init.name], axis=axis, name=f"{init.name}.dequantize"))
    _replace_initializers(graph, kept, nodes)
    # biases and position embeddings (float16 in the checkpoint), not the scales
    _float16_weights(model_proto, skip={n.input[1] for n in nodes})


def _external_weights(protos: dict) -> bytes:
    """Move the large float16 initializers of ``protos`` (name -> ModelProto, in place) into one
    file, :data:`WEIGHTS_FILE` as their graphs name it (ONNX external data, 64-byte aligned);
    returns that file's bytes."""
    from onnx import TensorProto

    blob = bytearray()
    for proto in protos.values():
        for init in proto.graph.initializer:
            if init.data_type != TensorProto.FLOAT16 or not init.raw_data:
                continue
            count = 1
            for d in init.dims:
                count *= d
            if count < EXTERNAL_MIN_ELEMENTS:
                continue
            blob += bytes(-len(blob) % 64)
            offset = len(blob)
            blob += init.raw_data
            length = len(init.raw_data)
            init.ClearField("raw_data")
            init.data_location = TensorProto.EXTERNAL
            for key, value in (("location", WEIGHTS_FILE), ("offset", str(offset)),
                               ("length", str(length))):
                entry = init.external_data.add()
                entry.key, entry.value = key, value
    return bytes(blob)


def byte_planes(data: bytes) -> bytes:
    """``data`` (little-endian 16-bit numbers) as two planes: every number's low byte, then every
    high byte (the page's ``joinPlanes`` undoes it). The high bytes of float16 weights (sign,
    exponent, two bits of mantissa) repeat much, so gzip squeezes the planes better."""
    if len(data) % 2:
        raise ValueError("16-bit data has an even number of bytes")
    return data[0::2] + data[1::2]


@contextlib.contextmanager
def _without_input_checks(model):
    """The model's input checks compare token ids with the vocabulary size, which the exporter
    cannot trace; the page checks what it feeds the model itself (lengths, known ids)."""
    saved = model.encoder._check_inputs, model.decoder._check_inputs
    model.encoder._check_inputs = lambda *args: None
    model.decoder._check_inputs = lambda *args: None
    try:
        yield
    finally:
        model.encoder._check_inputs, model.decoder._check_inputs = saved


def export_onnx(translator, weights: str = "float16") -> dict[str, bytes]:
    """``{"encoder": bytes, "decoder": bytes, "weights": bytes}``: the translator's model as two
    ONNX graphs (the encoder, one incremental decoder step) with dynamic lengths, and the file
    of their float16 weights (empty for ``weights="int8"``, whose weights stay in the graphs);
    see the module docstring."""
    import logging
    import warnings

    import onnx
    import torch

    if weights not in WEIGHTS:
        raise TranslatorAssetError(f"weights={weights!r}: the site stores weights as one of "
                                   f"{', '.join(WEIGHTS)}")
    model = translator.model.float().eval()
    quantized = None
    if weights == "int8":
        model, quantized = _quantized_model(model)
    encoder, decoder = _graphs(model)
    spec = decoder_spec(model)
    src = torch.tensor([[5, 6, 7, 8, 9, translator.src_vocab.eos_idx]])
    src_len = torch.export.Dim("src_len", min=1, max=model.config["max_positions"])
    beam = torch.export.Dim("beam", min=1, max=64)
    protos = {}
    with tempfile.TemporaryDirectory(prefix="convs2s-onnx-") as tmp, \
            _without_input_checks(model), torch.no_grad(), warnings.catch_warnings(), \
            contextlib.redirect_stdout(None):
        warnings.simplefilter("ignore")
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        conved, combined = (t.expand(2, -1, -1).contiguous() for t in encoder(src))
        tokens = torch.tensor([[translator.trg_vocab.bos_idx]] * 2)
        histories = [torch.zeros(2, spec["hid_dim"], spec["history"])
                     for _ in range(spec["layers"])]
        for name, module, args, shapes, inputs, outputs in (
                ("encoder", encoder, (src,), ({1: src_len},), ["src"], ["conved", "combined"]),
                ("decoder", decoder, (tokens, torch.tensor([0]), conved, combined, *histories),
                 ({0: beam}, None, {0: beam, 1: src_len}, {0: beam, 1: src_len},
                  tuple({0: beam} for _ in histories)),  # *histories: one argument
                 spec["inputs"], spec["outputs"])):
            path = Path(tmp) / f"{name}.onnx"
            torch.onnx.export(module, args, str(path), dynamo=True, dynamic_shapes=shapes,
                              input_names=inputs, output_names=outputs, opset_version=OPSET,
                              verbose=False)
            proto = onnx.load(str(path))  # with its weights (the exporter writes them apart)
            if quantized is None:
                _float16_weights(proto)
            else:
                _int8_weights(proto, quantized)
            protos[name] = proto
    for proto in protos.values():
        onnx.checker.check_model(proto)
    blob = _external_weights(protos) if quantized is None else b""
    return {"encoder": protos["encoder"].SerializeToString(),
            "decoder": protos["decoder"].SerializeToString(), "weights": blob}


# --------------------------------------------------------------------------------------------
# What the page's tokenizer needs, and the examples
# --------------------------------------------------------------------------------------------


def tokenizer_data(translator) -> dict:
    """The sentencepiece model as the page's tokenizer uses it (``translator.js``): every piece
    with its score (a BPE merge makes the highest-scoring piece first), which pieces text may
    become (normal ones; not the controls <pad> <bos> <eos>, nor <unk>), the specials' ids.
    Refuses a model the page's tokenizer does not implement (another normalization than
    identity, a unigram model, user-defined pieces)."""
    from convs2s.data.multi30k import LANGUAGE_NAMES

    pipeline = translator.pipeline
    tok = pipeline.src_tokenizer
    spec = tok.trained_with()
    if pipeline.kind != "subword" or spec.get("normalization") != "identity" or \
            pipeline.settings.model_type != "bpe":
        raise TranslatorAssetError("the page's tokenizer implements sentencepiece BPE with "
                                   f"identity normalization; this model has {spec}")
    proc = tok._proc
    n = proc.get_piece_size()
    pieces = [proc.id_to_piece(i) for i in range(n)]
    special = [proc.is_control(i) or proc.is_unknown(i) for i in range(n)]
    if pieces != translator.src_vocab.itos or pieces != translator.trg_vocab.itos:
        raise TranslatorAssetError("the vocabularies' ids are not sentencepiece's ids")
    normal = [i for i in range(n) if not special[i]]
    if any(proc.is_unused(i) for i in range(n)) or \
            pieces[4:] != [pieces[i] for i in normal]:
        raise TranslatorAssetError("the subword model has unused or user-defined pieces, "
                                   "which the page's tokenizer does not implement")
    v = translator.trg_vocab
    return {"pieces": pieces, "scores": [round(proc.get_score(i), 6) for i in range(n)],
            "first_normal": 4, "unk": v.unk_idx, "pad": v.pad_idx, "bos": v.bos_idx,
            "eos": v.eos_idx, "max_positions": translator.max_positions,
            # the source language's name, as the package's messages give it
            "source_name": LANGUAGE_NAMES.get(translator.src_lang, translator.src_lang)}


def fallback_examples(translator, sentences) -> list[dict]:
    """Greedy translations by the package (``translator``: :func:`page_package`, computing with
    the page's weights), for a browser without WebAssembly."""
    texts = translator.translate(list(sentences), beam_size=1)
    return [{"source": s, "target": t}
            for s, t in zip(sentences, texts, strict=True)]


@functools.lru_cache(maxsize=4)
def _exported(name: str, model_sha256: str, weights: str) -> dict[str, bytes]:
    """The ONNX graphs of the shipped model ``name`` (by its sha256): exported once per
    process, and kept on disk for the next build (``build_cache``)."""
    import convs2s
    from tools.site import build_cache

    # the key: the file that pretrained() checks against the manifest, and how it is stored
    return build_cache.cached(
        "onnx", {"model": name, "sha256": model_sha256, "weights": weights},
        lambda: export_onnx(convs2s.pretrained(name), weights),
        check=lambda files: set(files) == {"encoder", "decoder", "weights"})


@functools.lru_cache(maxsize=4)
def _validation_pairs(name: str) -> tuple[tuple[str, str], ...]:
    """The Multi30k validation pairs of the direction ``name`` where the corpus is here, else
    none."""
    from convs2s.data.multi30k import DataError, load_multi30k

    src, trg = name.split("-")
    try:
        return tuple(tuple(p) for p in load_multi30k(download=False, src=src, trg=trg)["valid"])
    except (DataError, OSError, ValueError):
        return ()


def _validation_sentences(name: str, count: int) -> list[str]:
    """The first ``count`` validation sentences of the direction ``name`` where the corpus is
    here, else none."""
    return [s for s, _ in _validation_pairs(name)[:count]]


def page_package(name: str, weights: str, device=None):
    """The package's translator ``convs2s.pretrained(name)`` computing with the numbers the page
    computes with when it downloads ``weights``: for ``"float16"`` the package as shipped; for
    ``"int8"`` its model with every matrix replaced by its dequantised int8 values (what the
    page's ``DequantizeLinear`` nodes give), the rest unchanged. What "the page translates as
    the package does" compares the page with."""
    import convs2s

    if weights not in WEIGHTS:
        raise TranslatorAssetError(f"weights={weights!r}: the site stores weights as one of "
                                   f"{', '.join(WEIGHTS)}")
    translator = convs2s.pretrained(name, device=device)
    if weights == "int8":
        translator.model = _quantized_model(translator.model.float())[0].eval()
    return translator


def _libraries() -> dict[str, str]:
    """The versions of the libraries that measure the graphs (part of the measurement's key
    and record)."""
    import importlib.metadata

    out = {}
    for name in ("onnxruntime", "sacrebleu"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise TranslatorAssetError(
                f"measuring the site translator's int8 weights needs {name}: install the "
                "package's dev extra (make install, or pip install -e '.[dev]')") from None
    return out


def _measure(name: str, model_sha256: str, pairs) -> dict:
    """Validation sacreBLEU of the float16 and the int8 graphs of ``name`` (``translator_quality``),
    with how long each took."""
    import time

    import convs2s
    from tools.site.translator_quality import PageGraphs, validation_bleu

    translator = convs2s.pretrained(name, device="cpu")
    v, spec = translator.trg_vocab, decoder_spec(translator.model)
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    out = {}
    for weights in WEIGHTS:
        t0 = time.perf_counter()
        graphs = PageGraphs(_exported(name, model_sha256, weights), spec, bos=v.bos_idx,
                            eos=v.eos_idx, pad=v.pad_idx, max_positions=translator.max_positions)
        out[weights] = {**validation_bleu(translator, graphs, sources, references),
                        "seconds": round(time.perf_counter() - t0, 1)}
    return {"length_penalty": translator.length_penalty, "scores": out}


def chosen_weights(name: str, model_sha256: str, asked: str, log=print) -> tuple[str, dict]:
    """The weights the site ships for the model ``name`` when ``MODELS`` asks for ``asked``, and
    the record of why: ``"int8"`` only where the build measured (on the validation split, with
    the graphs the page runs: ``translator_quality``) that it scores at most ``MAX_BLEU_DROP``
    below float16, greedy and with beam 5; else ``"float16"`` (the package's own numbers). The
    measurement is kept in the build's cache (``build_cache``) for the next build."""
    from tools.site import build_cache
    from tools.site.translator_quality import BEAMS, MAX_BLEU_DROP

    if asked not in WEIGHTS:
        raise TranslatorAssetError(f"the site's translator asks for {asked!r} weights for "
                                   f"{name!r} (tools/site/translator.py MODELS): give one of "
                                   f"{', '.join(WEIGHTS)}")
    record = {"asked": asked, "max_drop": MAX_BLEU_DROP, "split": "valid",
              "metric": "sacreBLEU 13a", "beams": list(BEAMS)}
    if asked == "float16":
        return "float16", {**record, "shipped": "float16", "measured": False,
                           "why": "float16 asked for: the package's own weights"}
    pairs = _validation_pairs(name)
    if not pairs:
        log(f"translator: {name}: the Multi30k validation files are not here "
            "(CONVS2S_DATA_DIR), so its int8 weights cannot be measured: float16 ships")
        return "float16", {**record, "shipped": "float16", "measured": False,
                           "why": "the int8 weights were not measured (no Multi30k "
                                  "validation files where the site was built)"}
    libraries = _libraries()
    digest = hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()
    files = build_cache.cached(
        "translator-quality", {"model": name, "sha256": model_sha256, "valid": digest,
                               **libraries},
        lambda: {"quality.json": json.dumps(_measure(name, model_sha256, pairs)).encode()},
        check=lambda f: set(json.loads(f["quality.json"])["scores"]) == set(WEIGHTS))
    measured = json.loads(files["quality.json"])
    scores = measured["scores"]
    drop = max(scores["float16"][f"beam{k}"] - scores["int8"][f"beam{k}"] for k in BEAMS)
    shipped = "int8" if drop <= MAX_BLEU_DROP + 1e-9 else "float16"
    record.update(measured=True, sentences=len(pairs), shipped=shipped,
                  length_penalty=measured["length_penalty"], drop=round(drop, 2),
                  float16={f"beam{k}": scores["float16"][f"beam{k}"] for k in BEAMS},
                  int8={f"beam{k}": scores["int8"][f"beam{k}"] for k in BEAMS},
                  seconds=round(sum(s["seconds"] for s in scores.values()), 1), **libraries)
    record["why"] = (f"int8 scores at most {MAX_BLEU_DROP} below float16" if shipped == "int8"
                     else f"int8 scores {drop:.2f} below float16, more than {MAX_BLEU_DROP}")
    log(f"translator: {name}: validation sacreBLEU, float16 / int8: " + ", ".join(
        f"{'greedy' if k == 1 else f'beam {k}'} {record['float16'][f'beam{k}']:.2f} / "
        f"{record['int8'][f'beam{k}']:.2f}" for k in BEAMS) + f": {shipped} ships "
        f"({record['why']})")
    return shipped, record


def _gzip(data: bytes) -> bytes:
    """gzip at level 9 with no name and no time in the header: the same bytes every build."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def _add_file(out: dict, files: dict, path: str, data: bytes, *, planes: bool = False) -> str:
    """Put ``data`` gzip-compressed at ``path`` (+ ``.gz``) into ``out``, with its base64 chunk
    scripts for a page opened from disk; its entry into ``files``. Returns the path."""
    packed = _gzip(byte_planes(data) if planes else data)
    path += ".gz"
    out[path] = packed
    chunks = []
    for i in range(0, len(packed), CHUNK_BYTES):
        name = f"{path}.{i // CHUNK_BYTES}.js"
        text = base64.b64encode(packed[i:i + CHUNK_BYTES]).decode("ascii")
        out[name] = (f'window.convs2sTranslatorChunk({json.dumps(path)}, {i // CHUNK_BYTES}, '
                     f'"{text}");\n').encode()
        chunks.append(len(out[name]))
    files[path] = {"bytes": len(packed), "raw_bytes": len(data),
                   "sha256": hashlib.sha256(data).hexdigest(), "planes": planes,
                   "chunks": chunks}
    return path


def _model_files(out: dict, files: dict, name: str, settings: dict,
                 examples: tuple[str, ...]) -> dict:
    """One model's files (under ``name/``) into ``out``/``files``; its manifest entry."""
    import convs2s
    from convs2s.data.multi30k import LANGUAGE_NAMES
    from convs2s.run.pretrained import PretrainedError, pretrained_path, record

    try:
        rec = record(name)
        translator = convs2s.pretrained(name)
    except PretrainedError as e:
        raise TranslatorAssetError(f"the site's translator lists {name!r} "
                                   f"(tools/site/translator.py MODELS), but {e}") from None
    weights = settings["weights"]  # the weights chosen_weights chose
    parts = _exported(name, rec["sha256"], weights)
    page = page_package(name, weights, device="cpu")
    tokenizer = json.dumps(tokenizer_data(translator), ensure_ascii=False,
                           separators=(",", ":")).encode("utf-8")
    entry = {
        "files": {
            "tokenizer": _add_file(out, files, f"{name}/tokenizer.json", tokenizer),
            "encoder": _add_file(out, files, f"{name}/encoder.onnx", parts["encoder"]),
            "decoder": _add_file(out, files, f"{name}/decoder.onnx", parts["decoder"]),
        },
        "external_data": WEIGHTS_FILE if parts["weights"] else None,
        "weights": weights,
        "quality": settings["quality"],
        "decoder": decoder_spec(translator.model),
        "source_language": rec.get("direction", name).split("-")[0],
        "target_language": rec.get("direction", name).split("-")[-1],
        "source_name": LANGUAGE_NAMES.get(translator.src_lang, translator.src_lang),
        "target_name": LANGUAGE_NAMES.get(translator.trg_lang, translator.trg_lang),
        "model": {"direction": name, "file": pretrained_path(name).name,
                  "sha256": rec["sha256"], "epochs": rec["training"]["epochs"],
                  "length_penalty": translator.length_penalty,
                  "greedy_sacrebleu": {split: rec["scores"]["splits"][split]["float16"]
                                       ["beam1"]["sacrebleu"] for split in ("valid", "test")}},
        "length_penalty": translator.length_penalty,
        "sentence": settings.get("sentence", ""),
        "examples": fallback_examples(page, examples),
    }
    if parts["weights"]:
        entry["files"]["weights"] = _add_file(out, files, f"{name}/{WEIGHTS_FILE}",
                                              parts["weights"], planes=True)
    return entry


@functools.lru_cache(maxsize=1)
def _asset_files(models: tuple, ort_version: str) -> tuple[dict[str, bytes], dict]:
    """The files of ``_static/translator/`` by path, and the manifest: made once per process for
    the same models, onnxruntime-web and examples (a test run builds the site several times).
    ``models``: ``(name, model sha256, settings as JSON, examples)`` per model, the settings
    with the weights to ship and their record (:func:`chosen_weights`)."""
    ort = ort_files()
    out: dict[str, bytes] = {}
    files: dict[str, dict] = {}
    runtime = {"script": _add_file(out, files, ORT_SCRIPT, ort[ORT_SCRIPT].read_bytes()),
               "glue": _add_file(out, files, ORT_GLUE, ort[ORT_GLUE].read_bytes()),
               "wasm": _add_file(out, files, ORT_WASM, ort[ORT_WASM].read_bytes())}
    entries = {name: _model_files(out, files, name, json.loads(settings), examples)
               for name, _, settings, examples in models}
    manifest = {"format": 2, "onnxruntime_web": ort_version, "default": models[0][0],
                "runtime": runtime, "models": entries, "files": files}
    text = ("window.convs2sTranslatorManifest = " +
            json.dumps(manifest, ensure_ascii=False, separators=(",", ":")) + ";\n")
    out["manifest.js"] = text.encode("utf-8")
    return out, manifest


def download_bytes(files: dict[str, bytes], manifest: dict, model: str | None = None) -> int:
    """The bytes a reader downloads over http(s) from turning to the translator (a click into
    its box, or its button) to the first translation of ``model`` (the default one if None):
    the manifest, the runtime's files and that model's files (no chunk script: those are for a
    page opened from disk)."""
    entry = manifest["models"][model or manifest["default"]]
    paths = ["manifest.js", *manifest["runtime"].values(), *entry["files"].values()]
    return sum(len(files[p]) for p in paths)


def write_assets(dest: Path, log=print) -> dict:
    """Write the translator's files into ``dest`` (a new folder under the built site's
    ``_static``); returns what was written: ``{"files": {path: bytes}, "download_bytes": n,
    "models": {name: n}, "directions": {name: {"bytes": n, "weights": ..., "quality": ...}}}``
    (the bytes a reader downloads from turning to the translator to its first translation, for
    the default model and for each; per model also the weights shipped and the record of their
    measurement, :func:`chosen_weights`, which the page shows)."""
    from convs2s.run.pretrained import PretrainedError, record

    ort_files()  # the installed onnxruntime-web is the locked one, or one line says what to do
    models = []
    for name, settings in MODELS.items():
        try:
            sha = record(name)["sha256"]
        except PretrainedError as e:
            raise TranslatorAssetError(f"the site's translator lists {name!r} "
                                       f"(tools/site/translator.py MODELS), but {e}") from None
        examples = (settings["sentence"], *_validation_sentences(name, FALLBACK_EXAMPLES - 1))
        shipped, quality = chosen_weights(name, sha, settings.get("weights", "float16"), log)
        chosen = {**settings, "weights": shipped, "quality": quality}
        models.append((name, sha, json.dumps(chosen, sort_keys=True), examples))
    files, manifest = _asset_files(tuple(models), locked_version())
    dest.mkdir(parents=True)
    for path, data in files.items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(data)
    written = {path: len(data) for path, data in sorted(files.items())}
    per_model = {name: download_bytes(files, manifest, name) for name in manifest["models"]}
    download = per_model[manifest["default"]]
    log(f"translator: {download / 1e6:.1f} MB to download on request "
        f"({', '.join(f'{n}: {b / 1e6:.1f} MB' for n, b in per_model.items())})")
    directions = {name: {"bytes": per_model[name], "weights": entry["weights"],
                         "quality": entry["quality"]}
                  for name, entry in manifest["models"].items()}
    return {"files": written, "download_bytes": download, "models": per_model,
            "directions": directions}
