"""The course's shipped translator in the reader's browser (issue 38): what ``make site`` writes
into ``_static/translator/`` for notebook 06's page (``static/translator.js`` runs it).

- The shipped model (``convs2s.pretrained("de-en")``, the checkpoint notebook 06 studies) is
  exported to ONNX as two graphs with torch's exporter: the encoder (``src [1, src_len]`` ->
  ``conved``, ``combined``) and the decoder over whole target prefixes (``trg [beam, trg_len]``
  and the encoder's outputs -> the last position's logits and every layer's attention).
  The page decodes greedily or with beam search by running the decoder on the growing prefixes:
  the same tokens as the package's incremental decoding (a causal decoder's earlier rows do not
  change), and one graph without a cache to carry between calls.
- Weights are stored as float16, as the shipped checkpoint stores them (each float16 initializer
  is cast to float32 when the page loads the model, so the page computes in float32 from the
  same numbers as the package: the export refuses a weight that float16 would change).
- onnxruntime-web (``package.json``, pinned by ``package-lock.json``; ``make site`` installs it
  with ``npm ci``) is vendored: its one classic script, its WebAssembly glue and binary.
- Everything the page needs beyond its own script is written as *classic scripts*: a page opened
  from disk (``file://``) may run ``<script src>`` files but may not ``fetch`` files or import
  modules, so each binary travels base64-encoded in chunks of ``CHUNK_BYTES``, loaded one after
  the other (the progress bar counts them). ``manifest.js`` holds the rest: the sentencepiece
  pieces and scores (the page's tokenizer), the model's record, the parts and chunks, and
  pre-translated examples for a browser without WebAssembly.

Nothing here is loaded until the reader presses the page's button, so the other pages, and
notebook 06's page until then, weigh what they weighed before.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import tempfile
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
NODE_MODULES = SITE_DIR / "node_modules"
PACKAGE_LOCK = SITE_DIR / "package-lock.json"
ORT_PACKAGE = "onnxruntime-web"
#: onnxruntime-web's files the page uses: the classic (non-module) script for the WebAssembly
#: backend, the Emscripten glue it imports, and the WebAssembly binary.
ORT_SCRIPT = "ort.wasm.min.js"
ORT_GLUE = "ort-wasm-simd-threaded.mjs"
ORT_WASM = "ort-wasm-simd-threaded.wasm"
#: Bytes of binary per chunk script (about 1.4 MB of base64): small steps for the progress bar.
CHUNK_BYTES = 1 << 20
#: Sentences the page translates without WebAssembly (pre-translated here by the package): the
#: sentence notebook 06's widget starts with, then the first validation sentences.
DEFAULT_SENTENCE = "Ein kleiner Hund spielt im Schnee."
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
    """The two modules the page runs, for one sentence (without padding)."""
    import torch

    from convs2s.model.encoder import EncoderOut

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, src):  # src = [1, src_len]
            out = self.model.encode(src)
            return out.conved, out.combined  # each [1, src_len, emb_dim]

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, trg, conved, combined):  # trg = [beam, trg_len]
            # one sentence, no padding; its encoder output repeated once per hypothesis
            mask = torch.ones(conved.shape[:2], dtype=torch.bool)
            logits, attention = self.model.decode(trg, EncoderOut(conved, combined, mask))
            # the next token's logits [beam, vocab]; attention [beam, layers, trg_len, src_len]
            return logits[:, -1], attention

    return Encoder(), Decoder()


def _float16_weights(model_proto) -> None:
    """Store every float32 weight of ``model_proto`` as float16, cast back to float32 by a node
    at the graph's start (onnxruntime folds it when the page loads the model). In place; a weight
    that float16 would change is refused (the shipped model's weights are float16 already)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model_proto.graph
    kept, casts = [], []
    for init in graph.initializer:
        value = numpy_helper.to_array(init)
        if value.dtype != np.float32 or value.size < 2:
            kept.append(init)
            continue
        half = value.astype(np.float16)
        if not np.array_equal(half.astype(np.float32), value):
            raise TranslatorAssetError(f"the weight {init.name} is not float16-exact: the page "
                                       "would compute with other numbers than the package")
        kept.append(numpy_helper.from_array(half, f"{init.name}.float16"))
        casts.append(helper.make_node("Cast", [f"{init.name}.float16"], [init.name],
                                      to=TensorProto.FLOAT, name=f"{init.name}.to_float32"))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


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


def export_onnx(translator) -> dict[str, bytes]:
    """``{"encoder": bytes, "decoder": bytes}``: the translator's model as two ONNX graphs with
    dynamic lengths and float16 weights (see the module docstring)."""
    import logging
    import warnings

    import onnx
    import torch

    model = translator.model.float().eval()
    encoder, decoder = _graphs(model)
    src = torch.tensor([[5, 6, 7, 8, 9, translator.src_vocab.eos_idx]])
    trg = torch.tensor([[translator.trg_vocab.bos_idx, 10, 11]] * 2)
    src_len = torch.export.Dim("src_len", min=1, max=model.config["max_positions"])
    beam = torch.export.Dim("beam", min=1, max=64)
    trg_len = torch.export.Dim("trg_len", min=1, max=model.config["max_positions"])
    out = {}
    with tempfile.TemporaryDirectory(prefix="convs2s-onnx-") as tmp, \
            _without_input_checks(model), torch.no_grad(), warnings.catch_warnings(), \
            contextlib.redirect_stdout(None):
        warnings.simplefilter("ignore")
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        conved, combined = (t.expand(2, -1, -1).contiguous() for t in encoder(src))
        for name, module, args, shapes, inputs, outputs in (
                ("encoder", encoder, (src,), ({1: src_len},), ["src"], ["conved", "combined"]),
                ("decoder", decoder, (trg, conved, combined),
                 ({0: beam, 1: trg_len}, {0: beam, 1: src_len}, {0: beam, 1: src_len}),
                 ["trg", "conved", "combined"],
                 ["logits", "attention"])):
            path = Path(tmp) / f"{name}.onnx"
            torch.onnx.export(module, args, str(path), dynamo=True, dynamic_shapes=shapes,
                              input_names=inputs, output_names=outputs, opset_version=OPSET,
                              verbose=False)
            proto = onnx.load(str(path))  # with its weights (the exporter writes them apart)
            _float16_weights(proto)
            onnx.checker.check_model(proto)
            out[name] = proto.SerializeToString()
    return out


# --------------------------------------------------------------------------------------------
# What the page's tokenizer needs, and the examples
# --------------------------------------------------------------------------------------------


def tokenizer_data(translator) -> dict:
    """The sentencepiece model as the page's tokenizer uses it (``translator.js``): every piece
    with its score (a BPE merge makes the highest-scoring piece first), which pieces text may
    become (normal ones; not the controls <pad> <bos> <eos>, nor <unk>), the specials' ids.
    Refuses a model the page's tokenizer does not implement (another normalization than
    identity, a unigram model, user-defined pieces)."""
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
            "eos": v.eos_idx, "max_positions": translator.max_positions}


def fallback_examples(translator, sentences) -> list[dict]:
    """Greedy translations by the package, for a browser without WebAssembly."""
    texts = translator.translate(list(sentences), beam_size=1)
    return [{"german": s, "english": t} for s, t in zip(sentences, texts, strict=True)]


@functools.lru_cache(maxsize=2)
def _exported(model_sha256: str) -> tuple[bytes, bytes]:
    """The ONNX graphs of the shipped model (by its sha256): exported once per process."""
    import convs2s

    del model_sha256  # the cache key: the file that pretrained() checks against the manifest
    parts = export_onnx(convs2s.pretrained("de-en"))
    return parts["encoder"], parts["decoder"]


def _validation_sentences(count: int) -> list[str]:
    """The first ``count`` validation sentences where the corpus is here, else none."""
    from convs2s.data.multi30k import DataError, load_multi30k

    try:
        return [de for de, _ in load_multi30k(download=False)["valid"][:count]]
    except (DataError, OSError):
        return []


@functools.lru_cache(maxsize=1)
def _asset_files(model_sha256: str, ort_version: str,
                 examples: tuple[str, ...]) -> dict[str, bytes]:
    """The files of ``_static/translator/`` by name: made once per process for the same model,
    onnxruntime-web and examples (a test run builds the site several times)."""
    import convs2s
    from convs2s.run.pretrained import pretrained_path, record

    files = ort_files()
    rec = record("de-en")
    translator = convs2s.pretrained("de-en")
    encoder, decoder = _exported(model_sha256)
    parts = [("glue", files[ORT_GLUE].read_bytes()), ("wasm", files[ORT_WASM].read_bytes()),
             ("encoder", encoder), ("decoder", decoder)]
    stream = b"".join(data for _, data in parts)
    out = {ORT_SCRIPT: files[ORT_SCRIPT].read_bytes()}
    chunks = []
    for i in range(0, len(stream), CHUNK_BYTES):
        name = f"chunk-{i // CHUNK_BYTES:03d}.js"
        data = base64.b64encode(stream[i:i + CHUNK_BYTES]).decode("ascii")
        out[name] = f'window.convs2sTranslatorChunk({i // CHUNK_BYTES}, "{data}");\n'.encode()
        chunks.append({"file": name, "bytes": len(out[name])})
    manifest = {
        "model": {"direction": "de-en", "file": pretrained_path("de-en").name,
                  "sha256": model_sha256, "epochs": rec["training"]["epochs"],
                  "length_penalty": translator.length_penalty,
                  "greedy_sacrebleu": {split: rec["scores"]["splits"][split]["float16"]
                                       ["beam1"]["sacrebleu"] for split in ("valid", "test")}},
        "onnxruntime_web": ort_version,
        "parts": [{"name": name, "bytes": len(data),
                   "sha256": hashlib.sha256(data).hexdigest()} for name, data in parts],
        "chunks": chunks,
        "tokenizer": tokenizer_data(translator),
        "examples": fallback_examples(translator, examples),
    }
    out["manifest.js"] = ("window.convs2sTranslatorManifest = " +
                          json.dumps(manifest, ensure_ascii=False) + ";\n").encode("utf-8")
    return out


def write_assets(dest: Path, log=print) -> dict:
    """Write the translator's files into ``dest`` (a new folder under the built site's
    ``_static``); returns what was written: ``{"files": {name: bytes}, "download_bytes": n}``
    (the bytes a reader downloads on pressing the button)."""
    from convs2s.run.pretrained import record

    ort_files()  # the installed onnxruntime-web is the locked one, or one line says what to do
    examples = (DEFAULT_SENTENCE, *_validation_sentences(FALLBACK_EXAMPLES - 1))
    files = _asset_files(record("de-en")["sha256"], locked_version(), examples)
    dest.mkdir(parents=True)
    for name, data in files.items():
        (dest / name).write_bytes(data)
    written = {name: len(data) for name, data in sorted(files.items())}
    download = sum(written.values())
    chunks = sum(name.startswith("chunk-") for name in files)
    log(f"translator: {chunks} chunks, {download / 1e6:.1f} MB to download on request")
    return {"files": written, "download_bytes": download}
