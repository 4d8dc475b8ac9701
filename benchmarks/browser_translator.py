"""Notebook 06's translator on the website (issues 38, 47 and 63): what a reader downloads from
the click to the first translation, how long that takes, how fast the page translates beside
the package on the same CPU, and whether it translates as the package does.

    make site && python benchmarks/browser_translator.py [--site build/site] [--json out.json]

Serves the built site on localhost and opens notebook 06's page in Debian's Chromium
(headless, onnxruntime-web's WebAssembly backend, one thread). "The package" is the package
computing with the weights the page downloads (``tools.site.translator.page_package``: for int8
weights, ``convs2s.pretrained("de-en")`` with its matrices dequantised). Then:

- the reader who types: in a fresh tab (an empty cache), clicks into the box (which starts the
  download, and the page makes its onnxruntime sessions while the reader types), types
  ``TYPED`` at ``--typing-ms`` a character and presses Enter: the time from Enter to the
  page's translation (``performance.now()`` in the page, to the widget's ``translated``
  state), from the click into the box to the model being loaded, and every response's bytes
  from the click into the box (bodies, and headers apart); ``--first-runs`` times, each in a
  fresh tab;
- the click: presses the page's button in a fresh tab, without typing, and counts every
  response from the click until the page shows its first translation (the starting
  sentence, beam 5, as the slider starts): their bytes and the time from the click;
  ``--first-runs`` times;
- speed: ``--speed-sentences`` test2016 sentences of 6 to 40 words (spread over that range),
  all translated three times to warm up, then each ``--repeat`` times, with beam 5 and greedily, by
  the page (``window.convs2sTranslator.translate``) and by the package
  (``convs2s.pretrained("de-en").translate(sentence, beam_size=...)``, one torch thread, as the
  page); the medians per sentence, their ratio, and the median ratio;
- agreement: the first ``--sentences`` test2016 sentences (all 1,000 by default), greedy and
  beam 5, page and package (batched): how many translations differ (among the first 100 too),
  and each one's sacreBLEU against the references.

Run it alone on the machine where the times matter (the sizes are exact either way): the
report records the machine's load (``os.getloadavg()``) before and after each measurement.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from common import count_arg, json_arg, run_main, stamp, write_report

from convs2s.system.arguments import OneLineParser, whole_number_arg

ROOT = Path(__file__).resolve().parents[1]
PAGE = "06_inference_beam_search_bleu.html"
#: Sentences of the speed comparison: this many words at least and at most.
WORDS = (6, 40)
#: What the reader types (invented, caption-like; tests/site_and_tools/test_site_translator.py
#: types it too).
TYPED = "Zwei Kinder spielen am Strand mit einem roten Ball und lachen laut."


def speed_sentences(test: list[str], count: int) -> list[str]:
    """``count`` test sentences of ``WORDS`` words, spread evenly over their lengths (the
    shortest, the longest and between), the first of each length."""
    fitting = sorted(((len(s.split()), i, s) for i, s in enumerate(test)
                      if WORDS[0] <= len(s.split()) <= WORDS[1]))
    if count == 1:
        return [fitting[len(fitting) // 2][2]]
    picks = [fitting[round(j * (len(fitting) - 1) / (count - 1))] for j in range(count)]
    return [s for _, _, s in picks]


_CLICK = """() => { window.convs2sBench = new Promise((resolve) => {
    const root = document.querySelector('.convs2s-translator');
    const button = root.querySelector('.translator-load');
    let t0 = null;
    button.addEventListener('click', () => { t0 = performance.now(); }, {capture: true});
    new MutationObserver(() => {
      if (['translated', 'failed'].includes(root.dataset.state)) {
        resolve({ms: performance.now() - t0, state: root.dataset.state,
                 output: root.querySelector('.translator-output').textContent});
      }
    }).observe(root, {attributes: true, attributeFilter: ['data-state']});
  }); }"""

#: The reader who types: times from the click into the box (focus), the model loaded (the
#: Translate button enabled), Enter and the translation shown.
_TYPE = """() => { window.convs2sBench = new Promise((resolve) => {
    const root = document.querySelector('.convs2s-translator');
    const box = root.querySelector('input[name=sentence]');
    const go = root.querySelector('.translator-go');
    const t = {focus: null, loaded: null, enter: null, enterState: null};
    box.addEventListener('focus', () => { t.focus = t.focus ?? performance.now(); },
                         {capture: true});
    box.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && t.enter === null) {
        t.enter = performance.now(); t.enterState = root.dataset.state; }
    }, {capture: true});
    new MutationObserver(() => {
      if (t.loaded === null && !go.disabled) t.loaded = performance.now();
    }).observe(go, {attributes: true});
    new MutationObserver(() => {
      if (['translated', 'failed'].includes(root.dataset.state)) {
        resolve({ms: performance.now() - t.enter, loaded_after_focus_ms: t.loaded - t.focus,
                 typing_ms: t.enter - t.focus, state_at_enter: t.enterState,
                 state: root.dataset.state,
                 output: root.querySelector('.translator-output').textContent});
      }
    }).observe(root, {attributes: true, attributeFilter: ['data-state']});
  }); }"""


def load() -> dict:
    """The machine's load: the 1, 5 and 15-minute load averages and the number of CPUs."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1m": round(one, 2), "loadavg_5m": round(five, 2),
            "loadavg_15m": round(fifteen, 2), "cpus": os.cpu_count()}


def first_translation(browser, base: str, mode: str, typing_ms: int) -> dict:
    """One reader's first translation in a fresh tab: ``mode`` "type" (click into the box, type
    TYPED, Enter) or "click" (the button); the times, the responses' bytes from the first
    action on, and the load before and after."""
    from tools import site_screenshots as shots

    before = load()
    tab = shots.SitePage(browser, base)
    try:
        tab.open(PAGE)
        responses = []
        tab.page.on("requestfinished", lambda r: responses.append(r))
        root = tab.page.locator(".convs2s-translator")
        if mode == "type":
            tab.page.evaluate(_TYPE)
            box = root.locator("input[name=sentence]")
            box.click()
            box.press("Control+a")
            box.press_sequentially(TYPED, delay=typing_ms)
            box.press("Enter")
        else:
            tab.page.evaluate(_CLICK)
            root.locator(".translator-load").click()
        out = tab.page.evaluate("() => window.convs2sBench")
        # the last requestfinished events: one for each of the translator's files the page got
        asked = ("() => performance.getEntriesByType('resource')"
                 ".filter(e => e.name.includes('/_static/translator/')).length")
        for _ in range(200):
            if sum("/_static/translator/" in r.url for r in responses) >= \
                    tab.page.evaluate(asked):
                break
            tab.page.wait_for_timeout(50)
        sizes = [(r.url, r.sizes()) for r in responses]
        out.update({"mode": mode, "requests": len(sizes),
                    "body_bytes": sum(s["responseBodySize"] for _, s in sizes),
                    "header_bytes": sum(s["responseHeadersSize"] for _, s in sizes),
                    "files": {url.split("/_static/translator/", 1)[-1]: s["responseBodySize"]
                              for url, s in sizes},
                    "download_bytes_shown": int(root.get_attribute("data-download-bytes")),
                    "problems": tab.problems(), "load_before": before, "load_after": load()})
        return out
    finally:
        tab.close()


def page_figures(site: Path, speed: list[str], agreement: list[str], repeat: int,
                 runs: int, typing_ms: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from tools import screenshots
    from tools import site_screenshots as shots

    with shots.serve(site) as base, screenshots.Browser() as browser:
        out = {"typed": [first_translation(browser, base, "type", typing_ms)
                         for _ in range(runs)],
               "click": [first_translation(browser, base, "click", typing_ms)
                         for _ in range(runs)]}
        tab = shots.SitePage(browser, base)
        try:
            tab.open(PAGE)
            out["user_agent"] = tab.page.evaluate("navigator.userAgent")
            tab.page.locator(".convs2s-translator .translator-load").click()
            tab.page.wait_for_function("document.querySelector('.convs2s-translator')"
                                       ".dataset.state === 'translated'", timeout=300_000)
            out["speed_load_before"] = load()
            t0 = time.perf_counter()
            out["speed_ms"] = tab.page.evaluate(_TIMES, [speed, [5, 1], repeat])
            out["speed_wall_s"] = time.perf_counter() - t0
            out["speed_load_after"] = load()
            for k in (1, 5):
                t0 = time.perf_counter()
                out[f"beam{k}_tokens"] = tab.page.evaluate(_TOKENS, [agreement, k])
                out[f"beam{k}_wall_s"] = time.perf_counter() - t0
            out["problems"] = tab.problems()
            return out
        finally:
            tab.close()


_TIMES = """async ([sentences, beams, repeat]) => {
    const T = window.convs2sTranslator, out = [];
    // the browser compiles WebAssembly's hot functions again, optimised, while they run: a few
    // rounds first, so that no sentence's figure holds that
    for (let i = 0; i < 3; i++) {
      for (const s of sentences) for (const k of beams) await T.translate(s, k);
    }
    for (const s of sentences) {
      const row = {};
      for (const k of beams) {
        await T.translate(s, k);  // warm-up
        const times = [];
        for (let i = 0; i < repeat; i++) {
          const t = performance.now();
          await T.translate(s, k);
          times.push(performance.now() - t);
        }
        row[k] = times;
      }
      out.push(row);
    }
    return out; }"""

_TOKENS = """async ([sentences, k]) => {
    const out = [];
    for (const s of sentences) out.push((await window.convs2sTranslator.translate(s, k)).tokens);
    return out; }"""


def package_figures(speed: list[str], agreement: list[str], repeat: int, weights: str) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from tools.site.translator import page_package

    torch.set_num_threads(1)
    translator = page_package("de-en", weights, device="cpu")
    rows = []
    for _ in range(3):  # as the page: a few rounds first
        for s in speed:
            for k in (5, 1):
                translator.translate(s, beam_size=k)
    for s in speed:
        row = {}
        for k in (5, 1):
            translator.translate(s, beam_size=k)  # warm-up
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                translator.translate(s, beam_size=k)
                times.append((time.perf_counter() - t) * 1000)
            row[str(k)] = times
        rows.append(row)
    out = {"threads": 1, "speed_ms": rows}
    for k in (1, 5):
        t0 = time.perf_counter()
        out[f"beam{k}_tokens"] = translator.translate_tokens(agreement, beam_size=k)
        out[f"beam{k}_wall_s"] = time.perf_counter() - t0
    out["detokenize"] = translator.detokenize
    return out


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--repeat", type=whole_number_arg, default=5)
    parser.add_argument("--speed-sentences", type=whole_number_arg, default=10)
    parser.add_argument("--sentences", type=whole_number_arg, default=1000,
                        help="test2016 sentences compared with the package (default: all)")
    parser.add_argument("--first-runs", type=whole_number_arg, default=3,
                        help="fresh tabs for each way to the first translation (default 3)")
    parser.add_argument("--typing-ms", type=count_arg, default=150,
                        help="milliseconds a typed character (default 150: 80 words a minute)")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    translator_dir = args.site / "_static" / "translator"
    if not translator_dir.is_dir():
        raise FileNotFoundError(f"{translator_dir} is missing: build the site first (make site)")
    manifest = json.loads((translator_dir / "manifest.js").read_text(encoding="utf-8")
                          .split("=", 1)[1].strip().rstrip(";"))
    weights = manifest["models"]["de-en"]["weights"]
    import sacrebleu

    from convs2s.data.multi30k import load_multi30k
    from convs2s.system.environment import describe_device

    test = load_multi30k(download=False)["test"]
    sources = [de for de, _ in test]
    speed = speed_sentences(sources, args.speed_sentences)
    agreement, references = sources[:args.sentences], [en for _, en in test[:args.sentences]]
    page = page_figures(args.site, speed, agreement, args.repeat, args.first_runs,
                        args.typing_ms)
    package = package_figures(speed, agreement, args.repeat, weights)
    detokenize = package.pop("detokenize")

    per_sentence = []
    for s, p, q in zip(speed, page.pop("speed_ms"), package.pop("speed_ms"), strict=True):
        row = {"sentence": s, "words": len(s.split())}
        for k in ("5", "1"):
            row[f"beam{k}_page_ms"] = statistics.median(p[k])
            row[f"beam{k}_package_ms"] = statistics.median(q[k])
            row[f"beam{k}_ratio"] = row[f"beam{k}_page_ms"] / row[f"beam{k}_package_ms"]
        per_sentence.append(row)
    agree = {}
    for k in (1, 5):
        mine, theirs = page.pop(f"beam{k}_tokens"), package.pop(f"beam{k}_tokens")
        differ = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
        bleu = {name: sacrebleu.corpus_bleu([detokenize(t) for t in toks], [references]).score
                for name, toks in (("page", mine), ("package", theirs))}
        agree[f"beam{k}"] = {"sentences": len(mine), "differ": len(differ),
                             "differ_first_100": sum(i < 100 for i in differ),
                             "first_differing": differ[:10], "sacrebleu": bleu,
                             "page_wall_s": page.pop(f"beam{k}_wall_s"),
                             "package_batched_wall_s": package.pop(f"beam{k}_wall_s")}
    first = {}
    for mode in ("typed", "click"):
        runs = page[mode]
        first[mode] = {"median_ms": statistics.median(r["ms"] for r in runs),
                       "ms": [round(r["ms"]) for r in runs],
                       "body_bytes": max(r["body_bytes"] for r in runs),
                       "loadavg_1m": [r["load_before"]["loadavg_1m"] for r in runs]}
    report = stamp({
        "benchmark": "browser_translator", "device": describe_device("cpu"),
        "weights": {n: m["weights"] for n, m in manifest["models"].items()},
        "quality": {n: m["quality"] for n, m in manifest["models"].items()},
        "onnxruntime_web": manifest["onnxruntime_web"], "typed": TYPED,
        "typing_ms": args.typing_ms, "first_translation": first, "page": page,
        "speed": {"words": list(WORDS), "repeat": args.repeat, "sentences": per_sentence,
                  **{f"beam{k}_median_ratio": statistics.median(r[f"beam{k}_ratio"]
                                                                for r in per_sentence)
                     for k in ("5", "1")}},
        "agreement": agree,
    })
    print(f"weights: {report['weights']}; machine load before each run (1-minute average, "
          f"{os.cpu_count()} CPUs): typed {first['typed']['loadavg_1m']}, "
          f"click {first['click']['loadavg_1m']}")
    for mode, what in (("typed", "Enter after typing (the download began on the click into "
                                 "the box)"), ("click", "the button's click, nothing typed")):
        for r in page[mode]:
            extra = (f"; loaded {r['loaded_after_focus_ms'] / 1000:.1f} s after the click into "
                     f"the box, Enter at {r['typing_ms'] / 1000:.1f} s (state "
                     f"{r['state_at_enter']})" if mode == "typed" else "")
            print(f"first translation from {what}: {r['ms']:.0f} ms; {r['body_bytes']:,} "
                  f"bytes ({r['body_bytes'] / 1e6:.2f} MB) in {r['requests']} responses "
                  f"(+{r['header_bytes']:,} bytes of headers); the button says "
                  f"{r['download_bytes_shown']:,}{extra}; load "
                  f"{r['load_before']['loadavg_1m']} -> {r['load_after']['loadavg_1m']}")
    for k in ("5", "1"):
        print(f"beam {k}: page / package (1 thread), median over {len(per_sentence)} "
              f"sentences: {report['speed'][f'beam{k}_median_ratio']:.2f}x; " + ", ".join(
                  f"{r['words']}w {r[f'beam{k}_page_ms']:.0f}/{r[f'beam{k}_package_ms']:.0f} ms"
                  for r in per_sentence))
    for k in (1, 5):
        a = agree[f"beam{k}"]
        print(f"{'greedy' if k == 1 else 'beam 5'}: {a['differ']} of {a['sentences']} differ "
              f"({a['differ_first_100']} of the first 100); sacreBLEU page "
              f"{a['sacrebleu']['page']:.2f}, package {a['sacrebleu']['package']:.2f}")
    problems = page["problems"] + [p for mode in ("typed", "click") for r in page[mode]
                                   for p in r["problems"]]
    if problems:
        print("problems in the page:", problems)
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
