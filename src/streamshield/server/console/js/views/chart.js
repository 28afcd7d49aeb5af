// Charts over the last minutes, drawn with uPlot (vendored from npm in vendor/uplot,
// served from the package; it builds its DOM with createElement and sets styles through
// CSSOM, which the CSP allows). Each chart reads one API route every few seconds while
// its page is shown: a query's throughput, batch duration and delivery lag from
// GET /queries/{name}; a stream's accepted and denied tuples and ingest rate from
// GET /streams/{name}/ingest (counters since the server started, drawn per second).
// A chart is as wide as its card (and follows it when the window is resized); its
// legend shows the newest sample's values while the pointer is not over the plot.

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

/** A series' value at the pointer, or its newest when the pointer is not over the plot
 * (uPlot would show "--" there). */
function atPointer(plot, value, seriesIdx, idx) {
  if (idx != null) return value;
  const column = plot.data[seriesIdx];
  return column.length ? column[column.length - 1] : null;
}

/** A legend value: "no data" for a gap, else the number with one decimal at most. */
function legendValue(plot, value, seriesIdx, idx) {
  const shown = atPointer(plot, value, seriesIdx, idx);
  return shown == null ? "no data" : String(Math.round(shown * 10) / 10);
}

/** The legend's time: the sample's, in the user's zone. */
function legendTime(plot, value, seriesIdx, idx) {
  const shown = atPointer(plot, value, seriesIdx, idx);
  return shown == null ? "no sample yet" : new Date(shown * 1000).toLocaleTimeString();
}

/**
 * A card with a chart sampling ``path``; each series' ``sample(answer, previous, seconds)``
 * gives its point (null: no value). ``id`` names the card (its state line is
 * ``#<id>-state``); ``onSample`` sees every answer. It polls until the user leaves.
 */
function sampledChart(ctx, { id, title, path, series, axes, onSample }) {
  stylesheet();
  const data = [[], ...series.map(() => [])];
  const holder = h("div", { id: `${id}-plot`, class: "chart-plot" });
  const state = h("p", { id: `${id}-state`, class: "muted" }, "Sampling every 3 s…");
  const card = h("section", { class: "card", id }, h("h2", {}, title), holder, state);
  const plot = new uPlot(
    {
      width: 640,
      height: 220,
      series: [
        { label: "time", value: legendTime },
        ...series.map(({ sample, ...s }) => ({ ...s, value: legendValue })),
      ],
      axes,
    },
    data,
    holder,
  );
  // The card's width once it is on the page, and whenever it changes.
  const fit = () => {
    const width = Math.floor(holder.clientWidth);
    if (width > 0 && width !== plot.width) plot.setSize({ width, height: 220 });
  };
  const resized = new ResizeObserver(fit);
  resized.observe(holder);
  let timer = null;
  let previous = null;
  let stopped = false;
  const sample = async () => {
    if (timer !== null && !card.isConnected) {
      clearInterval(timer); // the page was redrawn (Refresh, Start, Stop): a new chart samples
      return;
    }
    try {
      const answer = await api.call("GET", path);
      if (stopped) return; // left or redrawn while the answer was on its way
      const now = Date.now() / 1000;
      const seconds = previous ? now - previous.at : null;
      data[0].push(now);
      series.forEach((s, i) => data[i + 1].push(s.sample(answer, previous && previous.answer, seconds) ?? null));
      previous = { answer, at: now };
      if (data[0].length > KEEP) for (const column of data) column.shift();
      plot.setData(data);
      // One sample has no span, and uPlot then spans 1,000 days: show the minute before it.
      if (data[0].length === 1) plot.setScale("x", { min: now - 60, max: now });
      if (plot.cursor.idx == null) plot.setLegend({ idx: null }); // the newest values
      const n = data[0].length;
      state.textContent = `${n} sample${n === 1 ? "" : "s"}, last ${new Date().toLocaleTimeString()}`;
      if (onSample) onSample(answer);
    } catch (err) {
      if (!ctx.fail(err)) show(state, `Not sampled: ${err.message}`);
    }
  };
  sample();
  timer = setInterval(sample, EVERY_MS);
  ctx.onLeave(() => {
    stopped = true;
    clearInterval(timer);
    resized.disconnect();
    plot.destroy();
  });
  return card;
}

/** A query's rows/s processed, batch duration and delivery lag (the largest of the
 * last 10 s; a gap when nothing was handed over). The first two are its shared
 * network's when ``network`` names one, and labelled so; ``onSample`` sees each answer. */
export function throughputChart(ctx, name, onSample, network) {
  const of = network ? " (network)" : "";
  return sampledChart(ctx, {
    id: "chart",
    title: "Throughput, batch duration and delivery lag",
    path: `/queries/${encodeURIComponent(name)}`,
    onSample,
    series: [
      {
        label: `rows/s processed${of}`,
        stroke: "#1f5fbf",
        scale: "rows",
        sample: (q) => q.processed_rows_per_second,
      },
      { label: `batch duration (ms)${of}`, stroke: "#a4262c", scale: "ms", sample: (q) => q.batch_duration_ms },
      {
        label: "delivery lag (ms)",
        stroke: "#2b7a3d",
        scale: "ms",
        sample: (q) => (q.delivery_lag_seconds == null ? null : Math.round(q.delivery_lag_seconds * 1000)),
      },
    ],
    axes: [{}, { scale: "rows", label: "rows/s" }, { scale: "ms", side: 1, label: "ms", grid: { show: false } }],
  });
}

/** Per second between two samples of a counter (null for the first sample). */
const perSecond = (key) => (now, before, seconds) =>
  before && seconds ? Math.max(0, now.counts[key] - before.counts[key]) / seconds : null;

/** A stream's tuples accepted and denied by secure ingest per second, and the elements
 * accepted per second over the last minute. */
export function streamChart(ctx, name, onSample) {
  return sampledChart(ctx, {
    id: "stream-chart",
    title: "Accepted and denied tuples",
    path: `/streams/${encodeURIComponent(name)}/ingest`,
    series: [
      { label: "tuples accepted/s", stroke: "#2b7a3d", scale: "n", sample: perSecond("tuples_accepted") },
      { label: "tuples denied/s", stroke: "#a4262c", scale: "n", sample: perSecond("tuples_denied") },
      { label: "elements in/s (1 min)", stroke: "#1f5fbf", scale: "n", sample: (s) => s.counts.rows_per_second },
    ],
    axes: [{}, { scale: "n", label: "per second" }],
    onSample,
  });
}
