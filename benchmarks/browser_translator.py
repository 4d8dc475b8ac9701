"""Notebook 06's translator on the website: what a reader downloads, and how long the page takes
to translate a 12-word sentence in headless Chromium, beside the package on the same CPU.

    make site && python benchmarks/browser_translator.py [--site build/site] [--json out.json]

Serves the built site on localhost, opens notebook 06's page in Debian's Chromium (headless,
onnxruntime-web's WebAssembly backend, one thread), loads the model through the page's own code
(``window.convs2sTranslator``), translates the sentence once to warm up and then ``--repeat``
times, greedily and with beam size 5; then the package (``convs2s.pretrained("de-en")
.translate(..., beam_size=1 or 5)``, the same searches) the same way, with one torch thread
(as the page) and with all of this machine's cores. Medians. Run it alone on the machine
(issue 38 asks for the README's figures).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from datetime import date
from pathlib import Path

from common import run_main, write_report

ROOT = Path(__file__).resolve().parents[1]
#: Twelve words (the README's figure is for this sentence).
SENTENCE = "Ein Mann mit blauem Hemd steht auf einer Leiter und putzt Fenster."


def page_times(site: Path, repeat: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from tools import screenshots
    from tools import site_screenshots as shots

    with shots.serve(site) as base, screenshots.Browser() as browser:
        tab = shots.SitePage(browser, base)
        try:
            tab.open("06_inference_beam_search_bleu.html")
            return tab.page.evaluate("""async ([sentence, repeat]) => {
                const T = window.convs2sTranslator;
                const m = await T.loadManifest();
                const t0 = performance.now();
                await T.loadModel();
                const load = performance.now() - t0;
                const first = await T.translate(sentence);
                const times = [];
                for (let i = 0; i < repeat; i++) {
                  const t = performance.now();
                  await T.translate(sentence);
                  times.push(performance.now() - t);
                }
                const beam = (await T.translate(sentence, 5)).text, beamTimes = [];
                for (let i = 0; i < repeat; i++) {
                  const t = performance.now();
                  await T.translate(sentence, 5);
                  beamTimes.push(performance.now() - t);
                }
                const bytes = m.chunks.reduce((s, c) => s + c.bytes, 0);
                return {text: first.text, tokens: first.tokens.length, load_ms: load,
                        translate_ms: times, beam5_text: beam, beam5_ms: beamTimes,
                        chunk_bytes: bytes, user_agent: navigator.userAgent};
            }""", [SENTENCE, repeat])
        finally:
            tab.close()


def package_times(repeat: int, threads: int) -> dict:
    import torch

    import convs2s

    torch.set_num_threads(threads)
    translator = convs2s.pretrained("de-en")
    out = {"threads": threads}
    for beam, name in ((1, ""), (5, "beam5_")):
        out[f"{name}text"] = translator.translate(SENTENCE, beam_size=beam)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            translator.translate(SENTENCE, beam_size=beam)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{name}translate_ms" if beam == 1 else "beam5_ms"] = times
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    translator_dir = args.site / "_static" / "translator"
    if not translator_dir.is_dir():
        raise FileNotFoundError(f"{translator_dir} is missing: build the site first (make site)")
    download = sum(f.stat().st_size for f in translator_dir.iterdir())
    page = page_times(args.site, args.repeat)
    one = package_times(args.repeat, 1)
    all_cores = package_times(args.repeat, os.cpu_count() or 1)
    from convs2s.system.environment import describe_device

    report = {
        "benchmark": "browser_translator", "date": date.today().isoformat(),
        "device": describe_device("cpu"), "sentence": SENTENCE,
        "words": len(SENTENCE.split()), "download_bytes": download,
        **{name: {**r, "median_ms": statistics.median(r["translate_ms"]),
                  "beam5_median_ms": statistics.median(r["beam5_ms"])}
           for name, r in (("page", page), ("package_1_thread", one),
                           ("package_all_cores", all_cores))},
        "same_translation": page["text"] == one["text"] == all_cores["text"] and
        page["beam5_text"] == one["beam5_text"] == all_cores["beam5_text"],
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
    }
    print(f"download on request: {download / 1e6:.1f} MB; model load in the page "
          f"{page['load_ms'] / 1000:.1f} s")
    print(f"12-word sentence, greedy: page {report['page']['median_ms']:.0f} ms, package "
          f"{report['package_1_thread']['median_ms']:.0f} ms (1 thread), "
          f"{report['package_all_cores']['median_ms']:.0f} ms ({all_cores['threads']} threads); "
          f"same translation: {report['same_translation']}: {page['text']}")
    print(f"beam 5: page {report['page']['beam5_median_ms']:.0f} ms, package "
          f"{report['package_1_thread']['beam5_median_ms']:.0f} ms (1 thread), "
          f"{report['package_all_cores']['beam5_median_ms']:.0f} ms: {page['beam5_text']}")
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
