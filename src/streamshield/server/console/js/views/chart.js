// A query's throughput and batch duration over the last minutes, drawn with uPlot
// (vendored from npm in vendor/uplot, served from the package; it builds its DOM with
// createElement and sets styles through CSSOM, which the CSP allows). The numbers are
// the fields of GET /queries/{name}, read every few seconds while the page is shown.

import * as api from "../api.js";
import { h, show } from "../dom.js";
import uPlot from "../../vendor/uplot/uPlot.esm.js";

const EVERY_MS = 3000;
const KEEP = 200; // samples: 10 minutes at one per 3 s

let styled = false;

function stylesheet() {
  if (styled) return;
  styled = true;
  document.head.append(h("link", { rel: "stylesheet", href: "vendor/uplot/uPlot.min.css" }));
}

/** The chart's card; it polls until the user leaves the page. */
export function throughputChart(ctx, name) {
  stylesheet();
  const path = `/queries/${encodeURIComponent(name)}`;
  const data = [[], [], []];
  const holder = h("div", { id: "chart-plot" });
  const state = h("p", { id: "chart-state", class: "muted" }, "Sampling every 3 s…");
  const card = h("section", { class: "card", id: "chart" }, h("h2", {}, "Throughput and batch duration"), holder, state);
  const plot = new uPlot(
    {
      width: 640,
      height: 220,
      series: [
        {},
        { label: "rows/s processed", stroke: "#1f5fbf", scale: "rows" },
        { label: "batch duration (ms)", stroke: "#a4262c", scale: "ms" },
      ],
      axes: [{}, { scale: "rows", label: "rows/s" }, { scale: "ms", side: 1, label: "ms", grid: { show: false } }],
    },
    data,
    holder,
  );
  let timer = null;
  const sample = async () => {
    if (timer !== null && !card.isConnected) {
      clearInterval(timer); // the page was redrawn (Refresh, Start, Stop): a new chart samples
      return;
    }
    try {
      const info = await api.call("GET", path);
      data[0].push(Date.now() / 1000);
      data[1].push(info.processed_rows_per_second ?? null);
      data[2].push(info.batch_duration_ms ?? null);
      if (data[0].length > KEEP) for (const column of data) column.shift();
      plot.setData(data);
      state.textContent = `${data[0].length} samples, last ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      if (!ctx.fail(err)) show(state, `Not sampled: ${err.message}`);
    }
  };
  sample();
  timer = setInterval(sample, EVERY_MS);
  ctx.onLeave(() => {
    clearInterval(timer);
    plot.destroy();
  });
  return card;
}
