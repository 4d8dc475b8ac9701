/* Notebooks 03, 04 and 05's widgets on the static site, with no Python kernel.

   Mirrors no computation: every number and picture is the package's, computed by the site's
   build (tools/site/flipbooks.py: decoder_numbers with convs2s.course.dependency.
   visible_positions and perturbation_effect; the frames drawn with convs2s.course.
   attention_maps.plot_sentence_attention (plot_attention_grid, titled by entropy_titles with
   its attention_entropy), and convs2s.course.analysis.plot_attention_epoch, with the line
   attention_epoch_line writes under it). It
   draws them as convs2s.course.dependency.plot_visible_positions and plot_perturbation draw
   theirs (tests/site_and_tools/test_site_flipbooks.py compares every setting). The controls
   are the ones the package declares (convs2s.course.widgets), with the ranges the notebook
   saved; live.js's input() draws them.

   The site's build writes, per widget, a script that puts its data in
   window.convs2sFlipbooks[name]; the page loads it just after the widget's element. Here:

   - "decoder-explorer" (notebook 03): the numbers of every setting, drawn in SVG as the
     notebook's two panels (dependency.plot_visible_positions, dependency.plot_perturbation);
   - "attention-by-sentence" (04) and "attention-by-epoch" (05): one picture per setting, the
     build's; a slider switches the image's src, so the page downloads the frame shown only;
     a layer selector shows one decoder layer's drawing (a phone shows no other) or the
     notebook's figure of every layer. */
(() => {
  // dependency.plot_visible_positions: hidden, past or present, future
  const MAP_COLOURS = ["#f2f2f2", "#1f4e79", "#d62728"];
  // dependency.plot_perturbation: before the changed token, the changed token, after it
  const BAR_COLOURS = {before: "#d62728", at: "#ff7f0e", after: "#1f77b4"};

  // live.js (loaded before this script) builds the SVG elements and the controls for both
  const {svgElement, figureSvg, control, input} = window.convs2sLive;

  function newForm() {
    const form = document.createElement("form");
    form.className = "live-controls";
    form.addEventListener("submit", (event) => event.preventDefault());
    return form;
  }

  /* Notebook 03's left panel: rows = predictions i, columns = inputs j; the changed token's
     column outlined. */
  function visibleMap(rows, position) {
    const n = rows.length, cell = 14, left = 40, top = 24;  // labels of 11 px at least
    const width = left + n * cell + 8, height = top + n * cell + 34;
    let future = 0;
    rows.forEach((row, i) => { for (let j = i + 1; j < n; j++) future += row[j] === "1"; });
    const title = `visible inputs (${future} future cells seen)`;
    const svg = figureSvg(width, height, {"aria-label": title, class: "flipbook-visible"});
    svg.appendChild(svgElement("text", {x: left, y: 14, "font-size": 12, class: "panel-title"},
                               title));
    rows.forEach((row, i) => [...row].forEach((on, j) => {
      const code = on === "1" ? (j > i ? 2 : 1) : 0;
      svg.appendChild(svgElement("rect", {x: left + j * cell, y: top + i * cell, width: cell,
                                          height: cell, fill: MAP_COLOURS[code],
                                          stroke: "#ffffff", "stroke-width": 0.5,
                                          "data-i": i, "data-j": j, "data-code": code}));
    }));
    svg.appendChild(svgElement("rect", {x: left + position * cell, y: top, width: cell,
                                        height: n * cell, fill: "none", stroke: "orange",
                                        "stroke-width": 2, class: "highlight",
                                        "data-position": position}));
    for (let t = 0; t < n; t += Math.max(1, Math.floor(n / 8))) {
      svg.appendChild(svgElement("text", {x: left + t * cell + cell / 2, y: top + n * cell + 12,
                                          "font-size": 11, "text-anchor": "middle"}, t));
      svg.appendChild(svgElement("text", {x: left - 4, y: top + t * cell + cell / 2 + 4,
                                          "font-size": 11, "text-anchor": "end"}, t));
    }
    svg.appendChild(svgElement("text", {x: left, y: top + n * cell + 29, "font-size": 11},
                               "decoder input position j (token fed in) →"));
    svg.appendChild(svgElement("text", {x: 4, y: top - 4, "font-size": 11}, "i ↓"));
    return svg;
  }

  /* Notebook 03's right panel: max |Δ logits| per output position when token `position`
     changes. */
  function perturbationBars(effect, position) {
    const n = effect.length, left = 52, top = 40, plotW = 14 * n, plotH = 14 * n - 16;
    const width = left + plotW + 28, height = top + plotH + 35;  // room for the longest title
    const moved = effect.slice(0, position).filter((e) => e > 0).length;
    const title = `change token ${position}: ${moved} earlier positions move`;
    const svg = figureSvg(width, height, {"aria-label": title, class: "flipbook-perturbation"});
    svg.appendChild(svgElement("text", {x: 4, y: 14, "font-size": 12, class: "panel-title"},
                               title));
    const max = Math.max(...effect) || 1, slot = plotW / n, base = top + plotH;
    svg.appendChild(svgElement("line", {x1: left, y1: base, x2: left + plotW, y2: base,
                                        class: "live-axis", "stroke-width": 0.8}));
    svg.appendChild(svgElement("line", {x1: left, y1: top, x2: left, y2: base,
                                        class: "live-axis", "stroke-width": 0.8}));
    for (const tick of [0, max / 2, max]) {
      const y = base - plotH * tick / max;
      svg.appendChild(svgElement("text", {x: left - 4, y: y + 4, "font-size": 11,
                                          "text-anchor": "end"}, +tick.toPrecision(2)));
    }
    effect.forEach((e, i) => {
      const h = plotH * e / max;
      const colour = i < position ? BAR_COLOURS.before
        : i === position ? BAR_COLOURS.at : BAR_COLOURS.after;
      svg.appendChild(svgElement("rect", {x: left + i * slot + slot * 0.1, y: base - h,
                                          width: slot * 0.8, height: h, fill: colour,
                                          "data-i": i, "data-value": e}));
    });
    const x = left + (position + 0.5) * slot;
    svg.appendChild(svgElement("line", {x1: x, y1: top, x2: x, y2: base, stroke: "#ff7f0e",
                                        "stroke-dasharray": "2 2", "stroke-width": 1}));
    for (let t = 0; t < n; t += Math.max(1, Math.floor(n / 8))) {
      svg.appendChild(svgElement("text", {x: left + (t + 0.5) * slot, y: base + 12,
                                          "font-size": 11, "text-anchor": "middle"}, t));
    }
    svg.appendChild(svgElement("text", {x: left, y: base + 29, "font-size": 11},
                               "output position i →"));
    svg.appendChild(svgElement("text", {x: 4, y: top - 8, "font-size": 11}, "max |Δ logits|"));
    return svg;
  }

  function decoderExplorer(root, data) {
    const form = newForm();
    const inputs = data.controls.map((spec) => input(spec));  // named as declared
    data.controls.forEach((spec, c) => control(form, spec.label, inputs[c]));
    const figure = document.createElement("div");
    figure.className = "live-figure flipbook-panels";
    root.replaceChildren(form, figure);
    const update = () => {
      const [padding, k, layers, position] = inputs.map((e, c) => (c ? +e.value : e.value));
      const setting = data.settings[`${padding},${k},${layers}`];
      figure.replaceChildren(visibleMap(setting.visible, position),
                             perturbationBars(setting.effect[position], position));
      root.dataset.state = JSON.stringify([padding, k, layers, position]);
    };
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  /* The windows where a flipbook shows one decoder layer at a time (site.css and figures.py's
     narrow drawings start there too): the notebook's figure of every layer would be shrunk to
     a quarter of its size or less. */
  const NARROW = window.matchMedia("(max-width: 719.98px)");

  /* The layer selector: a radio button per decoder layer and, on a wide window only, "all"
     (the notebook's figure). */
  function layerSelector(form, count) {
    const group = document.createElement("div");
    group.className = "flipbook-layers";
    group.setAttribute("role", "radiogroup");
    group.setAttribute("aria-label", "decoder layer shown");
    const name = document.createElement("span");
    name.className = "flipbook-layers-name";
    name.textContent = "decoder layer";
    group.appendChild(name);
    for (const value of [...Array.from({length: count}, (_, i) => `${i + 1}`), "all"]) {
      const label = document.createElement("label");
      if (value === "all") label.className = "flipbook-layers-all";
      const radio = document.createElement("input");
      Object.assign(radio, {type: "radio", name: "layer", value});
      label.append(radio, value === "all" ? "all" : value);
      group.appendChild(label);
    }
    form.appendChild(group);
    const radios = [...group.querySelectorAll("input")];
    return {
      get value() { return (radios.find((r) => r.checked) || radios[0]).value; },
      set value(v) { for (const r of radios) r.checked = r.value === v; },
    };
  }

  /* A flipbook of pictures: {name, label, value (the notebook's starting one), frames:
     [{value, src, alt, text, caption, layers: [{src, alt}]}], over_values}. With over_values
     (notebook 05: a frame for every value of the notebook's slider) the slider takes the
     notebook's values; otherwise (04: some of them) it runs over the frames and its output
     shows the notebook's value. Where the frames have their layers drawn one by one, a layer
     selector picks one (its caption, the notebook's figure title, above it) or, on a wide
     window, "all": the notebook's figure. The controls stay in view while the reader scrolls
     through the picture (site.css: sticky). */
  function pictures(root, data) {
    const form = newForm();
    const values = data.frames.map((f) => f.value);
    const name = data.name;  // the declared control's
    const slider = data.over_values
      ? input({name, options: [], min: values[0], max: values.at(-1), step: 1, value: data.value})
      : input({name, options: [], min: 0, max: values.length - 1, step: 1,
               value: Math.max(0, values.indexOf(data.value))});
    const frameOf = (v) => data.frames[data.over_values ? values.indexOf(+v) : +v];
    control(form, data.label, slider, (v) => frameOf(v).value);
    const layers = (data.frames[0].layers || []).length;
    const layer = layers ? layerSelector(form, layers) : null;
    const link = document.createElement("a");
    link.className = "site-figure-full";  // as site.js makes every figure: opens it full size
    link.target = "_blank";
    link.title = "Open the figure at full size";
    const img = document.createElement("img");
    img.className = "flipbook-frame";
    link.appendChild(img);
    const caption = document.createElement("p");
    caption.className = "flipbook-caption";
    const figure = document.createElement("div");
    figure.className = "live-figure";
    figure.append(caption, link);
    const text = document.createElement("p");
    text.className = "live-text";
    root.replaceChildren(form, figure, text);  // as the notebook: the figure, then its line
    const update = () => {
      const frame = frameOf(slider.value);
      const chosen = layer ? layer.value : "all";
      const shown = chosen === "all" ? frame : frame.layers[+chosen - 1];
      img.src = shown.src;
      img.alt = shown.alt;
      link.href = shown.src;
      caption.textContent = chosen === "all" ? "" : frame.caption;
      caption.hidden = chosen === "all";
      text.textContent = frame.text;
      root.dataset.state = JSON.stringify(frame.value);
      root.dataset.layer = chosen;
    };
    if (layer) {
      // a phone: layer 1 to start with, and never "all" (its option is hidden there)
      const fit = () => { if (NARROW.matches && layer.value === "all") layer.value = "1"; };
      layer.value = NARROW.matches ? "1" : "all";
      NARROW.addEventListener("change", () => { fit(); update(); });
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  const WIDGETS = {
    "decoder-explorer": decoderExplorer,
    "attention-by-sentence": pictures,
    "attention-by-epoch": pictures,
  };
  document.addEventListener("DOMContentLoaded", () => {
    for (const root of document.querySelectorAll(".convs2s-flipbook[data-widget]")) {
      const data = (window.convs2sFlipbooks || {})[root.dataset.widget];
      const build = WIDGETS[root.dataset.widget];
      if (build && data) build(root, data);
    }
  });
})();
