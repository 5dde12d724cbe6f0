// Courier console: the live chart of messages sent and popped per second.
//
// <figure data-rates="/api/rates" data-refresh="2000"> holds an <svg> to draw in;
// elements anywhere with data-rate="sent_per_s|popped_per_s" show the latest values. The
// rates come from the console's own ring buffer, so polling costs no database query.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const HEIGHT = 170;
  const PAD = { left: 44, right: 8, top: 8, bottom: 20 };
  const MIN_SPAN_S = 60;

  function svgElement(name, attributes) {
    const element = document.createElementNS(SVG, name);
    Object.entries(attributes).forEach(([key, value]) => element.setAttribute(key, value));
    return element;
  }

  function niceCeiling(value) {
    if (value <= 1) return 1;
    const magnitude = Math.pow(10, Math.floor(Math.log10(value)));
    const steps = [1, 2, 5, 10].map((step) => step * magnitude);
    return steps.find((step) => step >= value);
  }

  // The x axis covers the history there is (at least a minute, at most the window),
  // so a console that just started does not squeeze its first points into a corner.
  function span(data) {
    const first = data.points.length ? data.points[0].at - data.interval_s : data.now;
    return Math.min(data.window_s, Math.max(MIN_SPAN_S, data.now - first));
  }

  function scales(data, width) {
    const end = data.now;
    const start = end - span(data);
    const peak = Math.max(0, ...data.points.map((p) => Math.max(p.sent, p.popped)));
    const top = niceCeiling(peak);
    const x = (at) => PAD.left + ((at - start) / (end - start)) * (width - PAD.left - PAD.right);
    const y = (rate) => HEIGHT - PAD.bottom - (rate / top) * (HEIGHT - PAD.top - PAD.bottom);
    return { x, y, top, width };
  }

  function spanLabel(seconds) {
    return seconds < 120 ? "-" + Math.round(seconds) + " s" : "-" + Math.round(seconds / 60) + " min";
  }

  function drawAxes(svg, scale, seconds) {
    [0, 0.5, 1].forEach((fraction) => {
      const value = scale.top * fraction;
      const y = scale.y(value);
      svg.appendChild(svgElement("line", { x1: PAD.left, x2: scale.width - PAD.right, y1: y, y2: y, class: "grid" }));
      const label = svgElement("text", { x: PAD.left - 6, y: y + 4, class: "axis", "text-anchor": "end" });
      label.textContent = value.toLocaleString("en-US");
      svg.appendChild(label);
    });
    const left = svgElement("text", { x: PAD.left, y: HEIGHT - 4, class: "axis" });
    left.textContent = spanLabel(seconds);
    const right = svgElement("text", { x: scale.width - PAD.right, y: HEIGHT - 4, class: "axis", "text-anchor": "end" });
    right.textContent = "now";
    svg.append(left, right);
  }

  function drawLine(svg, points, scale, key) {
    if (points.length === 0) return;
    const coordinates = points.map((p) => scale.x(p.at).toFixed(1) + "," + scale.y(p[key]).toFixed(1));
    svg.appendChild(svgElement("polyline", { points: coordinates.join(" "), class: "line " + key }));
  }

  function draw(figure, data) {
    const svg = figure.querySelector("svg");
    const width = svg.clientWidth || 600; // draw in real pixels, so text is not stretched
    svg.setAttribute("viewBox", "0 0 " + width + " " + HEIGHT);
    svg.replaceChildren();
    const scale = scales(data, width);
    drawAxes(svg, scale, span(data));
    drawLine(svg, data.points, scale, "sent");
    drawLine(svg, data.points, scale, "popped");
    document.querySelectorAll("[data-rate]").forEach((element) => {
      element.textContent = Number(data[element.dataset.rate]).toFixed(1);
      element.dataset.value = String(data[element.dataset.rate]);
    });
  }

  async function refresh(figure) {
    if (document.hidden) return;
    try {
      const response = await fetch(figure.dataset.rates, { headers: { Accept: "application/json" } });
      if (response.ok) draw(figure, await response.json());
    } catch (error) {
      figure.dataset.error = error.message;
    }
  }

  function start() {
    document.querySelectorAll("figure[data-rates]").forEach((figure) => {
      refresh(figure);
      setInterval(() => refresh(figure), Number(figure.dataset.refresh || 2000));
    });
  }

  document.addEventListener("DOMContentLoaded", start);
})();
