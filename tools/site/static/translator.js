// Mirrors convs2s.data.subword.SubwordTokenizer, convs2s.data.plain_text and
// convs2s.model.search.greedy_decode/beam_search.
/* Notebook 06's translator in the reader's browser: the course's shipped models, one per
   direction (German → English, the one notebook 06 studies, and English → German), each
   exported to ONNX by tools/site/translator.py (the encoder, and one step of the package's
   incremental decoder, whose state, each layer's last k-1 convolution inputs, goes in and
   out), run by onnxruntime-web (WebAssembly), greedy decoding or beam search (the notebook's
   beam size slider), every decoder layer's attention drawn as in notebook 06.

   The element lists the directions (data-models, written by the site's build) and the page
   offers them in a menu; the box is labelled with the chosen direction's source language.
   Nothing is downloaded until the reader clicks into the sentence's box or presses the
   button: then manifest.js, and the gzip files of onnxruntime-web and of the one model chosen,
   fetched as binary over http(s), or loaded as base64 classic scripts from a page opened from
   disk (which may load scripts but not fetch files), with a progress bar; the onnxruntime
   sessions are made, and run a few times to warm them up, while the reader types, so that the
   first translation waits for little. Enter or the button translates as soon as the model is
   loaded. Choosing another direction afterwards offers to load that one's model (its files
   only: the runtime is loaded); each model loads once, switching back to a loaded one
   translates at once, and each direction's box keeps the sentence the reader typed in it.
   Under the translator, the weights it downloads (int8 or float16) and the validation BLEU
   that the site's build measured for both (translator.py chosen_weights).

   The tokenizer is sentencepiece's BPE encoding for a model learned with identity
   normalization (the course's, convs2s.data.subword): text in NFC; leading and trailing spaces
   dropped, runs of spaces made one, each space written "▁" and one "▁" put in front; the text
   split into characters; then, again and again, the adjacent pair whose concatenation is the
   highest-scoring piece of the model (the leftmost of equals) is merged, until no pair is a
   piece; a run of pieces the model does not know becomes one piece. tests/site_and_tools/
   test_site_translator.py compares its pieces with sentencepiece's for every validation
   sentence, and the page's translations with the package's; what the page refuses
   (checkSource) is what the package refuses (test_site_translator_refuses.py), and a typed
   sentence is made plain text first as the package makes it (plainText: tabs, non-breaking
   spaces, a byte order mark, zero-width spaces, terminal colours), with the same pieces. */
(() => {
  const SPACE = "\u2581";  // sentencepiece's "▁"
  const UNK_SURFACE = " \u2047 ";  // how sentencepiece decodes <unk>
  const here = document.currentScript ? document.currentScript.src : "";
  const BASE = here.slice(0, here.lastIndexOf("/") + 1) + "translator/";

  /* ---------------------------------------------------------------- the tokenizer */
  function vocabulary(tok) {
    if (!tok.ids) {
      tok.ids = new Map(tok.pieces.map((p, i) => [p, i]));
      tok.mergeable = new Map();  // pieces text may become, with their scores
      tok.longest = 1;  // code points of the longest of them
      for (let i = tok.first_normal; i < tok.pieces.length; i++) {
        tok.mergeable.set(tok.pieces[i], tok.scores[i]);
        tok.longest = Math.max(tok.longest, Array.from(tok.pieces[i]).length);
      }
    }
    return tok;
  }

  /* sentencepiece's normalizer with the identity rule: what the pieces are cut from */
  function normalize(text) {
    const words = text.normalize("NFC").split(" ").filter((w) => w.length > 0);
    return words.length ? SPACE + words.join(SPACE) : "";
  }

  /* the pieces of ``text``: sentencepiece's BPE encoding (see the top of this file) */
  function encodePieces(text, tok) {
    vocabulary(tok);
    const symbols = Array.from(normalize(text));  // one code point each
    if (!symbols.length) return [];
    // a doubly linked list of symbols; candidate merges in a heap (best score, then leftmost)
    const prev = symbols.map((_, i) => i - 1);
    const next = symbols.map((_, i) => (i + 1 < symbols.length ? i + 1 : -1));
    const heap = [];
    const better = (a, b) => (a.score !== b.score ? a.score > b.score : a.left < b.left);
    const push = (item) => {
      heap.push(item);
      for (let i = heap.length - 1; i > 0;) {
        const up = (i - 1) >> 1;
        if (!better(heap[i], heap[up])) break;
        [heap[i], heap[up]] = [heap[up], heap[i]];
        i = up;
      }
    };
    const pop = () => {
      const top = heap[0];
      const last = heap.pop();
      if (heap.length) {
        heap[0] = last;
        for (let i = 0; ;) {
          const l = 2 * i + 1, r = l + 1;
          let best = i;
          if (l < heap.length && better(heap[l], heap[best])) best = l;
          if (r < heap.length && better(heap[r], heap[best])) best = r;
          if (best === i) break;
          [heap[i], heap[best]] = [heap[best], heap[i]];
          i = best;
        }
      }
      return top;
    };
    const consider = (left, right) => {
      if (left < 0 || right < 0) return;
      const piece = symbols[left] + symbols[right];
      const score = tok.mergeable.get(piece);
      if (score !== undefined) push({left, right, piece, score});
    };
    for (let i = 1; i < symbols.length; i++) consider(i - 1, i);
    while (heap.length) {
      const top = pop();
      // a pair one of whose symbols has merged since: no longer there
      if (!symbols[top.left] || !symbols[top.right] ||
          symbols[top.left].length + symbols[top.right].length !== top.piece.length ||
          next[top.left] !== top.right) continue;
      symbols[top.left] = top.piece;
      symbols[top.right] = "";
      next[top.left] = next[top.right];
      if (next[top.right] >= 0) prev[next[top.right]] = top.left;
      consider(prev[top.left], top.left);
      consider(top.left, next[top.left]);
    }
    // as sentencepiece does, a run of pieces the model does not know is one (unknown) piece
    const pieces = [];
    let afterUnknown = false;
    for (const symbol of symbols.filter((s) => s.length > 0)) {
      const unknown = !tok.ids.has(symbol) || tok.ids.get(symbol) === tok.unk;
      if (unknown && afterUnknown) pieces[pieces.length - 1] += symbol;
      else pieces.push(symbol);
      afterUnknown = unknown;
    }
    return pieces;
  }

  /* A reader's sentence as plain text, before its pieces are made: the package's
     convs2s.data.plain_text (Translator.source_tokens does it). Terminal escape sequences
     removed (ESCAPES: the package's _ESCAPES), every run of whitespace (Python's str.isspace:
     tabs, newlines, non-breaking spaces) one space, no space at either end, control and format
     characters (\p{Cc}, \p{Cf}: NUL, a byte order mark, a zero-width space, a soft hyphen, a
     right-to-left override) dropped, then NFC. Plain text comes back unchanged. (The browser's
     Unicode may be newer than Python's: Unicode 15 made seven Egyptian hieroglyph controls Cf.) */
  const ESCAPES = new RegExp([
    /\x1b\[[0-?]*[ -\/]*[@-~]/, /\x9b[0-?]*[ -\/]*[@-~]/,  // CSI (ESC [ 31 m), C1 CSI
    /\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)/,  // OSC up to BEL or ST
    /\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)/,  // DCS, SOS, PM, APC up to ST
    /\x1b[ -\/]*[0-~]/,  // any other escape
  ].map((r) => r.source).join("|"), "g");
  const SPACES = /[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/g;
  const DROPPED = /[\p{Cc}\p{Cf}]/gu;
  function plainText(text) {
    const spaced = text.replace(ESCAPES, "").replace(SPACES, " ").replace(DROPPED, "");
    return spaced.split(" ").filter((w) => w.length > 0).join(" ").normalize("NFC");
  }

  /* What the package (Translator.source_tokens) refuses, with its messages, in its order:
     {message, pieces, unknown}; message "" for a sentence to translate. A sentence too long
     for the model is refused before the pieces are made when its length alone shows it (every
     piece holds at most tok.longest characters), so a pasted book does not block the page. */
  const PY_SPACE = /^[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;
  const INVISIBLE = /^[\p{Cc}\p{Cf}\p{Zs}\p{Zl}\p{Zp}]*$/u;
  const LONE_SURROGATE = /\p{Cs}/u;
  const WORD = /[\p{L}\p{N}]/u;
  function checkSource(sentence, tok) {
    vocabulary(tok);
    const refused = (message) => ({message, pieces: [], unknown: []});
    const tooLong = (what) => refused(`The source sentence is ${what}, but the model handles ` +
      `at most ${tok.max_positions}. Shorten it or split it into several sentences.`);
    if (LONE_SURROGATE.test(sentence)) {
      const chars = Array.from(sentence);
      const at = chars.findIndex((c) => LONE_SURROGATE.test(c));
      const hex = chars[at].charCodeAt(0).toString(16).padStart(4, "0");
      return refused(`Cannot translate text that is not valid Unicode: character ${at + 1} is ` +
        `'\\u${hex}', a lone surrogate (half of a UTF-16 pair, or a byte that was not UTF-8, ` +
        "decoded with errors='surrogateescape'). Fix the text's encoding.");
    }
    if (PY_SPACE.test(sentence)) {
      return refused("Cannot translate an empty or whitespace-only sentence.");
    }
    if (INVISIBLE.test(sentence)) {
      return refused("Nothing to translate: the sentence holds only invisible or control " +
                     "characters (such as NUL, a zero-width space or a byte order mark).");
    }
    const text = plainText(sentence);
    if (!text) {
      return refused("Nothing to translate: the sentence holds only terminal escape sequences " +
                     "(such as colour codes) and invisible or control characters. " +
                     `Give a ${tok.source_name || "German"} sentence.`);
    }
    const symbols = Array.from(normalize(text)).length;
    if (Math.ceil(symbols / tok.longest) > tok.max_positions) {
      return tooLong(`more than ${tok.max_positions} positions long (${symbols} characters)`);
    }
    const pieces = encodePieces(text, tok);
    if (pieces.length > tok.max_positions) {
      return tooLong(`${pieces.length} positions long (${pieces.length} tokens)`);
    }
    const unknown = pieces.filter((p) => !tok.ids.has(p) || tok.ids.get(p) === tok.unk);
    if (!pieces.some((p) => WORD.test(p) && !unknown.includes(p))) {
      const shown = unknown.filter((p) => p.replace(/[\u2581 ]/g, "") !== "");
      const listed = shown.slice(0, 10).map((p) => {
        const chars = Array.from(p);
        return chars.length <= 20 ? p : chars.slice(0, 20).join("") + "\u2026";
      }).join(", ") + (shown.length > 10 ? ` and ${shown.length - 10} more` : "");
      return refused("Nothing to translate: the model knows none of the sentence's words" +
                     (shown.length ? ` (unknown pieces: ${listed})` : "") +
                     `. Give a ${tok.source_name || "German"} sentence.`);
    }
    return {message: "", pieces, unknown};
  }

  function encodeIds(pieces, tok) {
    vocabulary(tok);
    return pieces.map((p) => (tok.ids.has(p) ? tok.ids.get(p) : tok.unk));
  }

  /* the text of output pieces, as sentencepiece decodes them (the package's detokenize) */
  function decodePieces(pieces, tok) {
    vocabulary(tok);
    const specials = new Set([tok.pad, tok.bos, tok.eos].map((i) => tok.pieces[i]));
    let text = "", atStart = true;
    for (const piece of pieces) {
      if (specials.has(piece)) continue;
      let out;
      const id = tok.ids.has(piece) ? tok.ids.get(piece) : tok.unk;
      if (id === tok.unk) {
        out = piece === tok.pieces[tok.unk] ? UNK_SURFACE : piece;
      } else {
        out = (atStart && piece.startsWith(SPACE) ? piece.slice(1) : piece).split(SPACE).join(" ");
      }
      text += out;
      atStart = atStart && out === "";
    }
    return text;
  }

  /* ---------------------------------------------------------------- loading */
  /* manifest.js (a classic script) lists the files: gzip-compressed, fetched as binary when the
     page is served over http(s); opened from disk (file://), where fetch is not allowed, the
     page loads the same bytes base64-encoded in classic scripts (<file>.<i>.js). Each file is
     inflated with the browser's DecompressionStream. Only the runtime (onnxruntime-web) and the
     files of the model asked for are loaded. */
  const OVER_HTTP = /^https?:/.test(BASE);

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src;
      s.onload = () => { s.remove(); resolve(); };
      s.onerror = () => { s.remove(); reject(new Error(`could not load ${src}`)); };
      document.head.appendChild(s);
    });
  }

  function base64Bytes(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const raw = atob(text);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  let manifest = null;
  async function loadManifest() {
    if (!manifest) {
      await loadScript(BASE + "manifest.js");
      manifest = window.convs2sTranslatorManifest;
    }
    return manifest;
  }

  /* the name of the model asked for (the manifest's default for none) */
  function modelName(m, name) {
    const n = name || m.default;
    if (!m.models[n]) {
      throw new Error(`this site has no translator ${n} (it has ${Object.keys(m.models)})`);
    }
    return n;
  }

  /* the bytes of ``path`` as they arrive: its response's body (http), or its chunk scripts'
     (file://), counted into onBytes */
  const chunkParts = new Map();  // file:// -> the chunks of each file loading
  async function compressedStream(path, onBytes) {
    const entry = manifest.files[path];
    if (OVER_HTTP) {
      const response = await fetch(BASE + path);
      if (!response.ok) throw new Error(`could not load ${path} (HTTP ${response.status})`);
      return response.body.pipeThrough(new TransformStream({
        transform(chunk, out) { onBytes(chunk.byteLength); out.enqueue(chunk); }}));
    }
    const parts = [];
    chunkParts.set(path, parts);
    window.convs2sTranslatorChunk = (p, i, text) => { chunkParts.get(p)[i] = base64Bytes(text); };
    try {
      for (let i = 0; i < entry.chunks.length; i++) {
        await loadScript(`${BASE}${path}.${i}.js`);
        onBytes(entry.chunks[i]);
      }
    } finally {
      chunkParts.delete(path);
    }
    return new Blob(parts).stream();
  }

  /* 16-bit numbers stored as two planes (every low byte, then every high byte; translator.py
     byte_planes) as the numbers again */
  function joinPlanes(planes) {
    const half = planes.length / 2;
    const out = new Uint16Array(half);
    for (let i = 0; i < half; i++) out[i] = planes[i] | (planes[half + i] << 8);
    return new Uint8Array(out.buffer);
  }

  /* the file ``path`` of the manifest, inflated (loaded once); onBytes(n) as its compressed
     bytes arrive */
  const files = new Map();
  function loadFile(path, onBytes = () => {}) {
    if (!files.has(path)) {
      const bytes = (async () => {
        const stream = (await compressedStream(path, onBytes))
          .pipeThrough(new DecompressionStream("gzip"));
        const data = new Uint8Array(await new Response(stream).arrayBuffer());
        return manifest.files[path].planes ? joinPlanes(data) : data;
      })();
      files.set(path, bytes);
      bytes.catch(() => files.delete(path));  // a file that failed may be asked for again
    }
    return files.get(path);
  }

  /* the tokenizer of the model ``name`` (the default one if none): its pieces and scores */
  async function loadTokenizer(name, onBytes) {
    const m = await loadManifest();
    const entry = m.models[modelName(m, name)];
    if (!entry.tokenizer) {
      const bytes = await loadFile(entry.files.tokenizer, onBytes);
      entry.tokenizer = entry.tokenizer || vocabulary(JSON.parse(new TextDecoder().decode(bytes)));
    }
    return entry.tokenizer;
  }

  /* onnxruntime-web: its script, its WebAssembly glue (a module, imported from a blob: a page
     opened from disk may not import files) and binary */
  const EMPTY_GRAPH = "CAk6NwoQCgF4EgF5IghJZGVudGl0eRIBZ1oPCgF4EgoKCAgBEgQKAggBYg8KAXkSCgoICAESBAoCCAFCBAoAEBQ=";
  let runtime = null;
  function loadRuntime(onBytes) {
    if (!runtime) {
      runtime = (async () => {
        const r = manifest.runtime;
        const [script, glue, wasm] = await Promise.all(
          [r.script, r.glue, r.wasm].map((p) => loadFile(p, onBytes)));
        const url = URL.createObjectURL(new Blob([script], {type: "text/javascript"}));
        try { await loadScript(url); } finally { URL.revokeObjectURL(url); }
        const ort = window.ort;
        ort.env.wasm.numThreads = 1;  // threads need a cross-origin-isolated page
        ort.env.wasm.wasmBinary = wasm;
        ort.env.wasm.wasmPaths = {mjs: URL.createObjectURL(new Blob([glue],
                                                                    {type: "text/javascript"}))};
        // onnxruntime starts its WebAssembly with the first session: a session of an empty graph
        // (y = Identity(x), 65 bytes from onnx.helper) starts it while the model's files arrive
        await ort.InferenceSession.create(base64Bytes(EMPTY_GRAPH));
        return ort;
      })();
      runtime.catch(() => { runtime = null; });
    }
    return runtime;
  }

  const models = new Map();
  /* the model ``name`` (the default one if none): its two ONNX sessions and tokenizer;
     onProgress(bytes so far, bytes in all) as its files and the runtime's arrive */
  async function loadModel(onProgress = () => {}, name) {
    const m = await loadManifest();
    name = modelName(m, name);
    if (!models.has(name)) {
      const model = (async () => {
        const entry = m.models[name];
        // the files still to come (a second direction: its model's; the runtime is here)
        const paths = [...Object.values(m.runtime), ...Object.values(entry.files)]
          .filter((p) => !files.has(p));
        const size = (p) => (OVER_HTTP ? m.files[p].bytes
                                       : m.files[p].chunks.reduce((a, b) => a + b, 0));
        const total = paths.reduce((sum, p) => sum + size(p), 0);
        let done = 0;
        const onBytes = (n) => { done = Math.min(done + n, total); onProgress(done, total); };
        onProgress(0, total);
        const f = entry.files;
        const [ort, tok, encoderBytes, decoderBytes, weights] = await Promise.all([
          loadRuntime(onBytes), loadTokenizer(name, onBytes), loadFile(f.encoder, onBytes),
          loadFile(f.decoder, onBytes), f.weights ? loadFile(f.weights, onBytes) : null]);
        onProgress(total, total);
        // int8 weights (translator.py): DequantizeLinear folded into float32 weights at load
        const options = {executionProviders: ["wasm"], graphOptimizationLevel: "all",
                         extra: {session: {disable_quant_qdq: "1"}}};
        if (weights) options.externalData = [{path: entry.external_data, data: weights}];
        const encoder = await ort.InferenceSession.create(encoderBytes, options);
        const decoder = await ort.InferenceSession.create(decoderBytes, options);
        return {name, ort, encoder, decoder, tok, spec: entry.decoder,
                lengthPenalty: entry.length_penalty};
      })();
      models.set(name, model);
      model.catch(() => models.delete(name));
    }
    return models.get(name);
  }

  /* ---------------------------------------------------------------- translating */
  /* the graphs' runs one after the other (a translation, the warm-up): ``work`` starts when the
     work asked for before it has ended */
  let queue = Promise.resolve();
  function exclusive(work) {
    const done = queue.then(work);
    queue = done.catch(() => {});
    return done;
  }

  /* Runs the graphs of a loaded model a few times, with the beam's rows, while the reader
     types: onnxruntime's first runs (its buffers) and the browser's first compilation of the
     hot WebAssembly then cost nothing to the first translation. Stops as soon as a translation
     is asked for, or ``wanted()`` says one waits for the model (between two steps of the
     decoder). */
  async function warmUp(model, rows, wanted) {
    const {ort, tok} = model;
    await exclusive(async () => {
      const encoded = await model.encoder.run({src: ids64(ort, [tok.first_normal, tok.eos],
                                                          [1, 2])});
      const rowsEncoded = {conved: repeated(ort, encoded.conved, rows),
                           combined: repeated(ort, encoded.combined, rows)};
      let histories = emptyHistories(model, rows);
      const tokens = Array.from({length: rows}, () => tok.bos);
      for (let step = 0; step < WARM_UP_STEPS && !wanted() && !translations; step++) {
        histories = (await decoderStep(model, tokens, step, rowsEncoded, histories)).histories;
      }
    });
  }
  const WARM_UP_STEPS = 24;

  const ids64 = (ort, ids, dims) => new ort.Tensor("int64", BigInt64Array.from(ids, BigInt),
                                                   dims);

  /* the encoder's outputs for one sentence, repeated ``rows`` times (one per hypothesis) */
  function repeated(ort, t, rows) {
    const data = new Float32Array(t.data.length * rows);
    for (let r = 0; r < rows; r++) data.set(t.data, r * t.data.length);
    return new ort.Tensor("float32", data, [rows, ...t.dims.slice(1)]);
  }

  /* the decoder's state at the start: per layer, k-1 zero inputs of its convolution */
  function emptyHistories(model, rows) {
    const {ort, spec} = model;
    return Array.from({length: spec.layers}, () => new ort.Tensor(
      "float32", new Float32Array(rows * spec.hid_dim * spec.history),
      [rows, spec.hid_dim, spec.history]));
  }

  /* row ``order[r]`` of ``t`` as row r, for each r (beam search's reordering) */
  function reordered(ort, t, order) {
    const width = t.data.length / t.dims[0];
    const data = new Float32Array(order.length * width);
    order.forEach((j, r) => data.set(t.data.subarray(j * width, (j + 1) * width), r * width));
    return new ort.Tensor("float32", data, [order.length, ...t.dims.slice(1)]);
  }

  /* one step of the incremental decoder (the package's, with its state as the graph's inputs and
     outputs) for every hypothesis: the newest token of each, at ``position`` */
  async function decoderStep(model, tokens, position, encoded, histories) {
    const {ort, decoder} = model;
    const feeds = {tokens: ids64(ort, tokens, [tokens.length, 1]),
                   position: ids64(ort, [position], [1]), ...encoded};
    histories.forEach((h, i) => { feeds[`history${i}`] = h; });
    const r = await decoder.run(feeds);
    const width = r.attention.data.length / tokens.length;  // layers * src_len
    return {logits: r.logits.data, vocab: r.logits.dims[1],
            attention: (row) => r.attention.data.subarray(row * width, (row + 1) * width),
            histories: histories.map((_, i) => r[`next${i}`])};
  }

  /* the package's greedy_decode for one sentence: never <pad> or <bos>, at most max_positions
     steps; with each output token, every decoder layer's attention while producing it */
  async function greedy(model, encoded) {
    const {tok} = model;
    let histories = emptyHistories(model, 1);
    const ids = [], attention = [];
    let token = tok.bos;
    for (let step = 0; step < tok.max_positions; step++) {
      const r = await decoderStep(model, [token], step, encoded, histories);
      const logits = r.logits;
      let best = -1, bestValue = -Infinity;
      for (let i = 0; i < logits.length; i++) {
        if (i === tok.pad || i === tok.bos) continue;
        if (logits[i] > bestValue) { bestValue = logits[i]; best = i; }
      }
      if (best === tok.eos) break;
      ids.push(best);
      attention.push(r.attention(0));
      histories = r.histories;
      token = best;
    }
    return {ids, attention};
  }

  /* the package's beam search (convs2s.model.search.beam_search) for one sentence: each step
     extends every live hypothesis by every token; of the 2k best candidates by total
     log-probability, <eos> among the k best finishes a hypothesis, the others (k at most) live
     on, each with its decoder state (the rows of the state reordered); done with k finished ones
     or after max_positions tokens; the finished ones are ranked by
     (sum of log p) / length ** alpha. Sums in float32, as the package's. */
  async function beamSearch(model, encoded, k, alpha) {
    const {ort, tok} = model;
    const f32 = Math.fround;
    const rowsEncoded = {conved: repeated(ort, encoded.conved, k),
                         combined: repeated(ort, encoded.combined, k)};
    let histories = emptyHistories(model, k);
    let rows = Array.from({length: k}, () => []);  // each hypothesis's tokens (no <bos>)
    let attentions = Array.from({length: k}, () => []);  // and its attention per token
    let last = rows.map(() => tok.bos);  // each hypothesis's newest token
    let scores = rows.map((_, j) => (j === 0 ? 0 : -Infinity));  // only hypothesis 0 at first
    const finished = [];
    for (let step = 0; step < tok.max_positions; step++) {
      const lastStep = step === tok.max_positions - 1;
      const r = await decoderStep(model, last, step, rowsEncoded, histories);
      const vocab = r.vocab, logits = r.logits;
      const nCand = Math.min(2 * k, k * vocab);
      const top = [];  // the nCand best [score, beam, token], best first
      for (let j = 0; j < k; j++) {
        if (scores[j] === -Infinity) continue;
        const row = logits.subarray(j * vocab, (j + 1) * vocab);
        let max = -Infinity, sum = 0;
        for (const x of row) max = Math.max(max, x);
        for (const x of row) sum += Math.exp(x - max);
        const logSum = max + Math.log(sum);
        for (let v = 0; v < vocab; v++) {
          if (v === tok.pad || v === tok.bos) continue;
          const score = f32(scores[j] + f32(row[v] - logSum));
          if (top.length === nCand && score <= top[nCand - 1][0]) continue;
          let at = top.length;
          while (at > 0 && top[at - 1][0] < score) at--;
          top.splice(at, 0, [score, j, v]);
          if (top.length > nCand) top.pop();
        }
      }
      const next = [], nextAttentions = [], nextScores = [], order = [], nextLast = [];
      top.forEach(([score, beam, token], rank) => {
        if (token === tok.eos) {
          if (rank < k) finished.push([score, step + 1, rows[beam], attentions[beam]]);
        } else if (next.length < k) {
          const tokens = [...rows[beam], token];
          const attention = [...attentions[beam], r.attention(beam)];
          if (lastStep) finished.push([score, step + 1, tokens, attention]);
          else {
            next.push(tokens); nextAttentions.push(attention); nextScores.push(score);
            order.push(beam); nextLast.push(token);
          }
        }
      });
      if (lastStep || next.length === 0 || finished.length >= k) break;
      while (next.length < k) {  // empty slots: never extended (score -inf)
        next.push(rows[0]); nextAttentions.push(attentions[0]); nextScores.push(-Infinity);
        order.push(0); nextLast.push(tok.eos);
      }
      histories = r.histories.map((h) => reordered(ort, h, order));
      rows = next; attentions = nextAttentions; scores = nextScores; last = nextLast;
    }
    const ranked = finished.map(([total, length, ids, attention], order) =>
      [total / Math.pow(length, alpha), order, ids, attention]);
    ranked.sort((a, b) => b[0] - a[0] || a[1] - b[1]);  // stable: the first finished first
    return ranked.length ? {ids: ranked[0][2], attention: ranked[0][3]}
                         : {ids: [], attention: []};
  }

  /* [layer][output token][source piece] from each output token's [layer * source piece] */
  function attentionMaps(perToken, layers) {
    if (!perToken.length) return [];
    const srcLen = perToken[0].length / layers;
    return Array.from({length: layers}, (_, l) => perToken.map(
      (a) => Array.from(a.subarray(l * srcLen, (l + 1) * srcLen))));
  }

  /* {ok, message, sourcePieces, unknown, tokens, text, attention}: the notebook's
     translate_for_display (beam size 1: greedy) by the model ``name`` (the default one if
     none), with the package's messages for bad input */
  async function translate(sentence, beamSize = 1, name) {
    translations++;
    try {
      return await translateNow(sentence, beamSize, name);
    } finally {
      translations--;
    }
  }
  let translations = 0;  // asked for and not done: a warm-up gives way to them

  async function translateNow(sentence, beamSize, name) {
    const m = await loadModel(undefined, name);
    const tok = m.tok;
    const empty = {sourcePieces: [], unknown: [], tokens: [], text: "", attention: []};
    const checked = checkSource(sentence, tok);
    if (checked.message) return {ok: false, message: checked.message, ...empty};
    const sourcePieces = checked.pieces;
    const srcIds = encodeIds(sourcePieces, tok);
    const found = await exclusive(async () => {
      const encoded = await m.encoder.run({src: ids64(m.ort, srcIds, [1, srcIds.length])});
      return beamSize > 1 ? beamSearch(m, encoded, beamSize, m.lengthPenalty)
                          : greedy(m, encoded);
    });
    const tokens = found.ids.map((i) => tok.pieces[i]);
    return {ok: true, message: "", sourcePieces,
            unknown: sourcePieces.filter((p, i) => srcIds[i] === tok.unk),
            tokens, text: decodePieces(tokens, tok),
            attention: attentionMaps(found.attention, m.spec.layers)};
  }

  /* ---------------------------------------------------------------- drawing */
  const SVG = "http://www.w3.org/2000/svg";
  function el(name, attrs = {}, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // matplotlib's "viridis" at 0, 0.25, 0.5, 0.75, 1 (the notebook's colour map)
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(w) {
    const x = Math.min(Math.max(w, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
    const c = VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
    return `rgb(${c.join(",")})`;
  }

  /* one heatmap per decoder layer: rows the output tokens, columns the source pieces */
  function drawAttention(box, result) {
    box.replaceChildren();
    if (!result.ok || !result.tokens.length) return;
    const unknown = new Set(result.unknown);
    const cols = result.sourcePieces.map((p) => (unknown.has(p) ? `${p}*` : p));
    const rows = result.tokens;
    // room for the labels at 11 px (about 7 px a character): output pieces on the left, source
    // pieces turned 60 degrees above the map, the layer's title above them
    const chars = (labels) => Math.max(...labels.map((t) => Array.from(t).length));
    const cell = 16, left = 10 + 7.2 * chars(rows), top = 26 + 6.3 * chars(cols);
    result.attention.forEach((layer, l) => {
      const w = left + cell * cols.length + 4 + 3.6 * Array.from(cols[cols.length - 1]).length,
            h = top + cell * rows.length + 4;
      const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img",
                             "aria-label": `decoder layer ${l + 1}'s attention`,
                             class: "translator-map"});
      svg.appendChild(el("text", {x: 2, y: 12, class: "translator-title"}, `layer ${l + 1}`));
      cols.forEach((c, j) => {
        const x = left + cell * j + cell / 2;
        svg.appendChild(el("text", {x, y: top - 4, transform: `rotate(-60 ${x} ${top - 4})`,
                                    class: "translator-label"}, c));
      });
      rows.forEach((r, i) => {
        svg.appendChild(el("text", {x: left - 4, y: top + cell * i + cell * 0.7,
                                    "text-anchor": "end", class: "translator-label"}, r));
        layer[i].forEach((weight, j) => {
          const rect = el("rect", {x: left + cell * j, y: top + cell * i, width: cell,
                                   height: cell, fill: colour(weight)});
          rect.dataset.layer = l; rect.dataset.i = i; rect.dataset.j = j;
          rect.dataset.weight = weight;
          rect.appendChild(el("title", {}, `${r} ← ${cols[j]}: ${weight.toFixed(2)}`));
          svg.appendChild(rect);
        });
      });
      box.appendChild(svg);
    });
  }

  /* ---------------------------------------------------------------- the widget */
  function node(tag, attrs = {}, text) {
    const e = document.createElement(tag);
    Object.assign(e, attrs);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function hasWebAssembly() {
    return typeof WebAssembly === "object" && typeof WebAssembly.instantiate === "function";
  }

  /* the directions the element offers, in its menu's order: data-models (the site's build
     writes it: name, languages, starting sentence, bytes to download on choosing it first);
     an element without it offers its data-model (else the manifest's default) alone */
  function directionsOf(root) {
    let list = [];
    try { list = JSON.parse(root.dataset.models || "[]"); } catch (e) { list = []; }
    if (!Array.isArray(list) || !list.length) {
      list = [{name: root.dataset.model || "", source_lang: "de", target_lang: "en",
               source: "German", target: "English", sentence: root.dataset.sentence || "",
               bytes: Number(root.dataset.downloadBytes)}];
    }
    return list;
  }

  /* the bytes the button downloads for the direction ``d`` now: what the site counted (the
     manifest, the runtime and the model) before anything is loaded; afterwards, those of its
     files not loaded yet (switching to a second direction: its model's files only) */
  function pendingBytes(d) {
    if (!manifest) return Number(d.bytes);
    const entry = manifest.models[modelName(manifest, d.name)];
    return [...Object.values(manifest.runtime), ...Object.values(entry.files)]
      .filter((p) => !files.has(p)).reduce((sum, p) => sum + manifest.files[p].bytes, 0);
  }

  async function showExamples(root, why) {
    root.replaceChildren(node("p", {className: "translator-status"}, why));
    try {
      const m = await loadManifest();
      for (const d of directionsOf(root)) {
        const entry = m.models[modelName(m, d.name)];
        const table = node("table", {className: "translator-examples"});
        table.dataset.model = modelName(m, d.name);
        table.appendChild(node("caption", {}, `${d.source} → ${d.target}, translated ` +
                                               "beforehand by the package (greedy)"));
        for (const e of entry.examples) {
          const row = node("tr");
          row.append(node("td", {lang: entry.source_language}, e.source),
                     node("td", {lang: entry.target_language}, e.target));
          table.appendChild(row);
        }
        root.appendChild(table);
      }
    } catch (e) {
      root.appendChild(node("p", {}, String(e.message || e)));
    }
  }

  /* what the page says of the weights it downloads for the direction ``d``: the site's build
     measured (translator.py chosen_weights, translator_quality.py) the validation BLEU of the
     int8 and the float16 graphs, and shipped int8 only where it loses at most max_drop */
  function weightsNote(d) {
    const q = d.quality;
    if (!q || !d.weights) return "";
    const figures = (w) => q.beams.map((k) => `${k === 1 ? "greedy" : `beam ${k}`} ` +
                                               `${q[w][`beam${k}`].toFixed(2)}`).join(", ");
    if (!q.measured) {
      return `Weights: ${d.weights}, as the package stores them (${q.why}).`;
    }
    const measured = `validation sacreBLEU on the ${q.sentences.toLocaleString("en")} ` +
      "Multi30k validation sentences, measured by the site's build with onnxruntime " +
      `${q.onnxruntime} on the graphs this page runs: int8 ${figures("int8")}; float16 ` +
      `${figures("float16")}`;
    return d.weights === "int8"
      ? "Weights: int8, one scale per output channel (the package's float16 weights " +
        `quantised, to download less), shipped because they lose at most ${q.max_drop} BLEU: ` +
        `${measured}. This page translates as the package does with the same int8 weights.`
      : `Weights: float16, the package's own (int8 would lose ${q.drop.toFixed(2)} BLEU, more ` +
        `than ${q.max_drop}: ${measured}).`;
  }

  function mount(root) {
    if (!hasWebAssembly()) {
      showExamples(root, "This browser cannot run WebAssembly, which the translator needs " +
                         "(onnxruntime-web): here are sentences the same models translated.");
      return;
    }
    const directions = directionsOf(root);
    let current = directions.find((d) => d.name === root.dataset.model) || directions[0];
    const ready = new Set();  // the directions whose model is loaded
    const loads = new Map();  // the directions whose model is loading: {done, total} bytes
    const wanted = new Set();  // the directions to translate as soon as their model is loaded
    const typed = new Map();  // each direction's sentence as the reader left it
    // the menu of directions ("German → English", ...): choosing one loads nothing by itself
    const menu = node("select", {name: "direction"});
    menu.setAttribute("aria-label", "direction");
    for (const d of directions) {
      menu.appendChild(node("option", {value: d.name}, `${d.source} \u2192 ${d.target}`));
    }
    menu.value = current.name;
    const menuLabel = node("label", {className: "translator-input"}, "direction ");
    menuLabel.appendChild(menu);
    menuLabel.hidden = directions.length < 2;
    // the sentence, labelled with its language
    const input = node("input", {type: "text", name: "sentence"});
    const language = document.createTextNode("");
    const label = node("label", {className: "translator-input"});
    label.append(language, input);
    // the notebook's beam size slider: 1 to 10, starting at 5
    const beam = node("input", {type: "range", min: 1, max: 10, step: 1, name: "beam_size",
                                value: root.dataset.beam || 5});
    beam.setAttribute("aria-label", "beam size");
    const beamShown = node("output", {}, beam.value);
    const beamLabel = node("label", {className: "translator-input"}, "beam size ");
    beamLabel.append(beam, beamShown);
    const load = node("button", {type: "button", className: "translator-load"});
    const go = node("button", {type: "button", className: "translator-go", disabled: true},
                    "Translate");
    const bar = node("progress", {max: 1, value: 0, hidden: true});
    bar.setAttribute("aria-label", "downloading the translator");
    const status = node("p", {className: "translator-status"});
    const output = node("p", {className: "translator-output"});
    output.setAttribute("aria-live", "polite");
    const maps = node("div", {className: "translator-maps"});
    const buttons = node("div", {className: "translator-buttons"});
    const weights = node("p", {className: "translator-weights"});
    buttons.append(load, go);
    root.replaceChildren(menuLabel, label, beamLabel, buttons, bar, status, output, maps,
                         weights);

    const name = (d) => `${d.source} \u2192 ${d.target}`;
    /* the download of the direction chosen, on the bar (another's goes on unseen) */
    const progress = () => {
      const l = loads.get(current.name);
      bar.hidden = !l;
      if (!l) return;
      bar.max = l.total || 1;
      bar.value = l.done;
      status.textContent = `downloading: ${(l.done / 1e6).toFixed(1)} of ` +
                           `${(l.total / 1e6).toFixed(1)} MB`;
    };
    /* the controls for the direction chosen: its language on the box, the reader's sentence
       for it (its starting sentence until the reader types), and either Translate (its model
       is loaded) or the button that loads it */
    const show = () => {
      language.textContent = `${current.source} `;
      input.setAttribute("aria-label", current.source);
      input.lang = current.source_lang;
      input.value = typed.has(current.name) ? typed.get(current.name) : current.sentence || "";
      output.replaceChildren();
      output.lang = current.target_lang;
      maps.replaceChildren();
      weights.textContent = weightsNote(current);
      controls();
    };
    /* the buttons, the bar and the status line for the direction chosen */
    const controls = () => {
      const loaded = ready.has(current.name);
      bar.hidden = true;
      load.hidden = loaded;
      go.disabled = !loaded;
      if (loaded) {
        status.textContent = `Type ${current.source} and press Translate (or Enter).`;
        root.dataset.state = "ready";
      } else if (loads.has(current.name)) {  // downloading (the button: translate then)
        root.dataset.state = "loading";
        progress();
      } else {
        const bytes = pendingBytes(current);
        root.dataset.downloadBytes = String(bytes);
        load.textContent = `Load ${name(current)} (${(bytes / 1e6).toFixed(0)} MB)`;
        status.textContent = ready.size
          ? `The ${name(current)} model downloads when you click into the box or press the ` +
            "button."
          : "The model and onnxruntime-web download when you click into the box or press " +
            "the button, for the direction chosen only.";
        root.dataset.state = "idle";
      }
    };

    const run = async () => {
      const d = current;
      if (!ready.has(d.name)) {  // translated as soon as its model is loaded
        wanted.add(d.name);
        begin(d);
        return;
      }
      go.disabled = true;
      const t0 = performance.now();
      const k = Number(beam.value);
      const result = await translate(input.value, k, d.name || undefined);
      if (d !== current) return;  // the reader chose another direction meanwhile
      const ms = performance.now() - t0;
      output.textContent = result.ok ? `${d.target}: ${result.text}` : `(${result.message})`;
      status.textContent = result.ok
        ? `${k === 1 ? "greedy" : `beam size ${k}`}, ${result.tokens.length} output pieces in ` +
          `${ms.toFixed(0)} ms` +
          (result.unknown.length ? `; unknown ${d.source} pieces: ${result.unknown.join(", ")}`
                                 : "")
        : "";
      drawAttention(maps, result);
      root.dataset.state = "translated";
      go.disabled = false;
    };
    /* Loads the direction ``d``'s model (once): onnxruntime-web and its files, then its two
       onnxruntime sessions, all while the reader types; then warms them up, unless a
       translation waits. Then translates, if the reader asked for it meanwhile. */
    const begin = (d) => {
      if (ready.has(d.name) || loads.has(d.name)) return;
      const l = {done: 0, total: 0};
      loads.set(d.name, l);
      if (d === current) controls();
      loadModel((done, total) => {
        l.done = done;
        l.total = total;
        if (d === current) progress();
      }, d.name || undefined).then(async (model) => {
        loads.delete(d.name);
        ready.add(d.name);
        if (d === current) {  // the box as the reader is typing in it
          controls();
          status.textContent = `Loaded. Type ${d.source} and press Translate (or Enter).`;
        }
        if (!wanted.has(d.name)) {
          await warmUp(model, Number(beam.value), () => wanted.has(d.name));
        }
        if (wanted.delete(d.name) && d === current) await run();
      }, (e) => {
        loads.delete(d.name);
        wanted.delete(d.name);
        if (d !== current) return;
        controls();
        root.dataset.state = "failed";
        status.textContent = `The translator could not be loaded: ${e.message || e}`;
      });
    };
    load.addEventListener("click", run);
    input.addEventListener("focus", () => begin(current));
    input.addEventListener("input", () => typed.set(current.name, input.value));
    menu.addEventListener("change", () => {
      current = directions.find((d) => d.name === menu.value) || directions[0];
      show();
      if (ready.has(current.name)) run();
    });
    go.addEventListener("click", run);
    beam.addEventListener("input", () => { beamShown.value = beam.value; });
    beam.addEventListener("change", () => { if (!go.disabled) run(); });
    // Enter translates (or loads, then translates), unless a translation is running
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (!go.disabled || !ready.has(current.name))) run();
    });
    show();
  }

  window.convs2sTranslator = {normalize, plainText, encodePieces, checkSource, decodePieces,
                              encodeIds,
                              loadManifest, loadTokenizer, loadModel, translate,
                              hasWebAssembly};
  const start = () => document.querySelectorAll(".convs2s-translator").forEach(mount);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
