/* Widgets that respond on the static site, with no Python kernel: notebook 01's
   dependency explorer and notebook 08's cost of a separable convolution.

   Mirrors (tests/site_and_tools/test_site.py compares each with the package for every setting
   of the widget's controls):
   - dependencyMap: convs2s.course.dependency.dependency_map (the measured map), with
     receptiveField: convs2s.course.receptive_field.receptive_field;
   - describe and line: convs2s.course.dependency.dependency_summary, describe_dependency and
     draw_dependency_explorer's text line;
   - convCosts and costsTitle: convs2s.model.variants.conv_costs and costs_title (the title
     of notebook 08's chart, convs2s.course.analysis.plot_conv_costs).

   Each widget's controls (names, labels, ranges, starting values) are not written here: the
   site gives them, as the package declares them (convs2s.course.widgets), in the element's
   data-controls; input() draws each one (flipbook.js uses it too).

   Notebook 01's dependency explorer: which inputs each output of a stack of L conv+GLU blocks of
   width k depends on, for "same", "causal" or no padding. In the notebook the package measures
   the map with autograd (convs2s.course.dependency.dependency_map); here the same map comes from
   the rules that measurement shows:

   - "same" (odd k): output i reads inputs i - L(k-1)/2 ... i + L(k-1)/2, cut to the sentence;
   - "causal": output i reads inputs i - L(k-1) ... i, cut at 0;
   - "none": the output is r - 1 shorter (r = 1 + L(k-1)); output i reads inputs i ... i + r - 1.

   The residual connection adds the input to each block's output, which adds no position the
   window does not already reach, so the rules hold with it. */
(() => {
  const COLOURS = ["#ffffff", "#4c72b0", "#e4572e"];  // dependency.MAP_COLOURS
  const LABELS = ["no dependence", "depends (past or present)", "depends on the FUTURE (j > i)"];

  function receptiveField(k, layers) {
    return 1 + layers * (k - 1);
  }

  /* {rows: bool[n_out][length]} or {error: the package's one-line ValueError} */
  function dependencyMap(k, layers, padding, length) {
    if (padding === "same" && k % 2 === 0) {
      return {error: `kernel_size=${k} is even, but padding='same' needs an odd kernel size: ` +
                     "(k-1)/2 zeros on each side must be a whole number. Use 1, 3, 5, ..."};
    }
    const r = receptiveField(k, layers);
    if (padding === "none" && length < r) {
      return {error: `Without padding, ${layers} layers of width ${k} need at least r=${r} ` +
                     `inputs to produce one output; length=${length} is too short.`};
    }
    const nOut = padding === "none" ? length - r + 1 : length;
    const rows = [];
    for (let i = 0; i < nOut; i++) {
      let lo, hi;
      if (padding === "same") [lo, hi] = [i - layers * (k - 1) / 2, i + layers * (k - 1) / 2];
      else if (padding === "causal") [lo, hi] = [i - layers * (k - 1), i];
      else [lo, hi] = [i, i + r - 1];
      rows.push(Array.from({length}, (_, j) => j >= lo && j <= hi));
    }
    return {rows};
  }

  /* dependency.dependency_summary, then dependency.describe_dependency: the same words */
  function describe(rows) {
    let field = 0, leaking = 0, ahead = 0, back = 0;
    rows.forEach((row, i) => {
      const cols = row.flatMap((on, j) => (on ? [j] : []));
      if (!cols.length) return;
      field = Math.max(field, cols.length);
      if (cols.some((j) => j > i)) leaking += 1;
      for (const j of cols) {
        ahead = Math.max(ahead, j - i);
        back = Math.max(back, i - j);
      }
    });
    let text = `receptive field ${field} inputs; `;
    if (leaking) {
      text += `${leaking} of ${rows.length} outputs see the FUTURE (up to ${ahead} positions ahead)`;
    } else {
      text += `no output sees the future (looks back up to ${back} positions)`;
    }
    return text;
  }

  function line(k, layers, padding, length) {
    const map = dependencyMap(k, layers, padding, length);
    if (map.error) return `not possible: ${map.error}`;
    const r = receptiveField(k, layers);
    return `r = 1 + L·(k-1) = 1 + ${layers}·${k - 1} = ${r}; measured: ${describe(map.rows)}`;
  }

  const SVG = "http://www.w3.org/2000/svg";

  function svgElement(name, attributes, text) {
    const e = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) e.setAttribute(key, value);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* A widget's figure (an <svg> with a viewBox) is never drawn smaller than its own size, where
     every label is at least 11 px: on a narrow screen its box (.live-figure, site.css) scrolls
     sideways instead; on a wide one it may grow to the column. */
  function figureSvg(width, height, attributes) {
    const svg = svgElement("svg", {viewBox: `0 0 ${width} ${height}`, role: "img", ...attributes});
    svg.style.minWidth = `${Math.ceil(width)}px`;
    return svg;
  }

  function drawMap(figure, rows, title) {
    figure.replaceChildren();
    const cell = 14, left = 34, top = 26, nOut = rows.length, nIn = rows[0].length;
    const width = left + nIn * cell + 8, height = top + nOut * cell + 30;
    const svg = figureSvg(width, height, {"aria-label": title, class: "live-map"});
    const heading = svgElement("text", {x: left, y: 14, "font-size": 12});
    heading.textContent = title;
    svg.appendChild(heading);
    rows.forEach((row, i) => row.forEach((on, j) => {
      const code = on ? (j > i ? 2 : 1) : 0;
      svg.appendChild(svgElement("rect", {x: left + j * cell, y: top + i * cell, width: cell,
                                          height: cell, fill: COLOURS[code], stroke: "#dddddd",
                                          "stroke-width": 0.5, "data-i": i, "data-j": j,
                                          "data-code": code}));
    }));
    const diag = Math.min(nOut, nIn);
    svg.appendChild(svgElement("line", {x1: left, y1: top, x2: left + diag * cell,
                                        y2: top + diag * cell, class: "live-axis",
                                        "stroke-dasharray": "4 3", "stroke-width": 0.8}));
    const xLabel = svgElement("text", {x: left, y: top + nOut * cell + 20, "font-size": 11});
    xLabel.textContent = "input position j →";
    const yLabel = svgElement("text", {x: 2, y: top + 10, "font-size": 11});
    yLabel.textContent = "i ↓";
    svg.append(xLabel, yLabel);
    figure.appendChild(svg);
  }

  /* one of the notebook's controls in the form: its label, the input, the value it shows
     (``shown(value)`` where the value is not what the reader should read); shared with
     flipbook.js */
  function control(form, label, input, shown) {
    const wrap = document.createElement("label");
    wrap.className = "live-control";
    const name = document.createElement("span");
    name.textContent = label;
    wrap.append(name, input);
    form.appendChild(wrap);
    if (input.tagName === "SELECT") return;  // a dropdown shows its value itself
    const value = document.createElement("output");
    wrap.appendChild(value);
    const show = () => { value.textContent = shown ? shown(input.value) : input.value; };
    input.addEventListener("input", show);
    show();
  }

  /* One declared control ({name, label, kind, value, min, max, step, options}, as
     convs2s.course.widgets.Control.as_dict gives it): a select for a dropdown, a text box for
     text, a slider otherwise; named as the notebook function's argument it sets. */
  function input(spec) {
    if (spec.options.length) {
      const select = document.createElement("select");
      select.name = spec.name;
      for (const o of spec.options) select.add(new Option(o, o, false, o === spec.value));
      return select;
    }
    const field = document.createElement("input");
    if (spec.kind === "text") {
      Object.assign(field, {type: "text", name: spec.name, value: spec.value});
    } else {
      Object.assign(field, {type: "range", name: spec.name, min: spec.min, max: spec.max,
                            step: spec.step, value: spec.value});
    }
    return field;
  }

  /* The widget's form: every declared control (the element's data-controls), labelled as
     declared; {form, inputs: {name: element}}. */
  function declaredForm(root) {
    const form = document.createElement("form");
    form.className = "live-controls";
    form.addEventListener("submit", (event) => event.preventDefault());
    const inputs = {};
    for (const spec of JSON.parse(root.dataset.controls)) {
      inputs[spec.name] = input(spec);
      control(form, spec.label, inputs[spec.name]);
    }
    return {form, inputs};
  }

  function dependencyExplorer(root) {
    // the notebook's controls, as declared: the same labels, ranges and starting values
    const {form, inputs} = declaredForm(root);
    const {kernel_size: k, n_layers: layers, padding, length} = inputs;
    const figure = document.createElement("div");
    figure.className = "live-figure";
    const text = document.createElement("p");
    text.className = "live-text";
    const legend = document.createElement("p");
    legend.className = "live-legend";
    legend.innerHTML = LABELS.map((label, c) =>
      `<span><i style="background:${COLOURS[c]}"></i>${label}</span>`).join(" ");
    root.replaceChildren(form, figure, legend, text);
    const update = () => {
      const values = [+k.value, +layers.value, padding.value, +length.value];
      const map = dependencyMap(...values);
      if (map.error) {
        figure.replaceChildren();
        const p = document.createElement("p");
        p.className = "live-error";
        p.textContent = map.error;
        figure.appendChild(p);
      } else {
        drawMap(figure, map.rows, `k=${values[0]}, L=${values[1]}, padding='${values[2]}'`);
      }
      text.textContent = line(...values);
      root.dataset.state = JSON.stringify(values);
    };
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  /* Notebook 08's cost widget: convs2s.model.variants.conv_costs for in = d, out = 2d, at one
     position (the formulas are the package's: tests compare them for every setting). */
  function convCosts(channels, k) {
    const cin = channels, cout = 2 * channels;
    const standard = cin * cout * k + cout;  // conv1d_parameters: in·out·k + out bias
    const separable = cin * k + cin * cout + cout;  // depthwise in·k + pointwise in·out + bias
    const standardFlops = 2 * cin * cout * k;  // conv1d_flops at length 1
    const separableFlops = 2 * (cin * k + cin * cout);
    return {standard_parameters: standard, separable_parameters: separable,
            parameter_ratio: standard / separable, standard_flops: standardFlops,
            separable_flops: separableFlops, flop_ratio: standardFlops / separableFlops};
  }

  function costsTitle(channels, k) {
    const c = convCosts(channels, k);
    return `k = ${k}: ${c.parameter_ratio.toFixed(2)}x fewer parameters, ` +
           `${c.flop_ratio.toFixed(2)}x fewer FLOPs`;
  }

  function costsWidget(root) {
    const {form, inputs} = declaredForm(root);
    const {channels, kernel_size: k} = inputs;
    const figure = document.createElement("div");
    figure.className = "live-figure";
    root.replaceChildren(form, figure);
    const update = () => {
      const d = +channels.value, width = +k.value, c = convCosts(d, width);
      const bars = [["standard", c.standard_parameters, "#1f77b4"],
                    ["depthwise-separable", c.separable_parameters, "#2ca02c"]];
      const W = 420, left = 150, top = 30, barH = 34, max = c.standard_parameters;
      const svg = figureSvg(W, top + 2 * (barH + 12) + 34,
                            {class: "live-costs", "aria-label": costsTitle(d, width)});
      const title = svgElement("text", {x: 4, y: 16, "font-size": 14, class: "live-title"});
      title.textContent = costsTitle(d, width);
      svg.appendChild(title);
      bars.forEach(([name, value, colour], n) => {
        const y = top + n * (barH + 12);
        const label = svgElement("text", {x: left - 6, y: y + barH / 2 + 4, "font-size": 13,
                                          "text-anchor": "end"});
        label.textContent = name;
        const w = Math.max(1, (W - left - 85) * value / max);
        const bar = svgElement("rect", {x: left, y, width: w, height: barH, fill: colour,
                                        "data-name": name, "data-value": value});
        const number = svgElement("text", {x: left + w + 4, y: y + barH / 2 + 4, "font-size": 13});
        number.textContent = value.toLocaleString("en-US");
        svg.append(label, bar, number);
      });
      const axis = svgElement("text", {x: 4, y: top + 2 * (barH + 12) + 20, "font-size": 13});
      axis.textContent = `parameters of one conv, ${d} -> ${2 * d} channels`;
      svg.appendChild(axis);
      figure.replaceChildren(svg);
      root.dataset.state = JSON.stringify([d, width]);
    };
    form.addEventListener("input", update);
    update();
  }

  const WIDGETS = {"dependency-explorer": dependencyExplorer, "conv-costs": costsWidget};
  window.convs2sLive = {dependencyMap, describe, line, receptiveField, convCosts, costsTitle,
                        control, input, svgElement, figureSvg};
  document.addEventListener("DOMContentLoaded", () => {
    for (const root of document.querySelectorAll(".convs2s-live[data-widget]")) {
      const build = WIDGETS[root.dataset.widget];
      if (build) build(root);
    }
  });
})();
