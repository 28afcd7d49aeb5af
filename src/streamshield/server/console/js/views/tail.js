// The live tail of a query's results over its SSE subscription, opened with the page
// when the query runs (Stop watching ends it, Watch live opens it again). A masked cell (the
// value is hidden from the subscriber's roles, listed in the row's `_masked`) is shown
// as "masked", visibly unlike a real NULL. The tail keeps the newest MAX_ROWS rows and
// redraws at most once per animation frame, so a fast stream cannot swamp the page;
// paused, it keeps reading (so the server does not drop a slow subscriber) and counts
// what arrives without redrawing.

import * as api from "../api.js";
import { errorBox, h, show } from "../dom.js";
import { events } from "../sse.js";

export const MAX_ROWS = 500;

export function tail(ctx, name, status) {
  let rows = [];
  let columns = [];
  let paused = false;
  let unseen = 0;
  let controller = null;
  let drawing = false;

  const state = h("p", { id: "tail-state", "aria-live": "polite" }, "Not watching.");
  const count = h("span", { id: "tail-count" }, "0 rows");
  const body = h("div", { id: "tail-rows" }, h("p", { class: "empty" }, "No rows yet."));
  const watch = h("button", { type: "button", id: "tail-watch" }, "Watch live");
  const pause = h("button", { type: "button", id: "tail-pause", disabled: true }, "Pause");
  const stop = h("button", { type: "button", id: "tail-stop", disabled: true }, "Stop watching");

  const draw = () => {
    drawing = false;
    count.textContent = `${rows.length} rows (newest first, at most ${MAX_ROWS})`;
    if (rows.length === 0) return;
    show(
      body,
      h(
        "table",
        { id: "tail" },
        h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => cell(row, c))))),
      ),
    );
  };
  const schedule = () => {
    if (paused || drawing) return;
    drawing = true;
    requestAnimationFrame(draw);
  };
  const received = (batch) => {
    for (const row of batch) {
      for (const key of Object.keys(row)) {
        if (key !== "_masked" && !columns.includes(key)) columns.push(key);
      }
    }
    rows = [...batch.slice().reverse(), ...rows].slice(0, MAX_ROWS);
    if (paused) {
      unseen += batch.length;
      state.textContent = `Paused: ${unseen} new rows not shown yet.`;
    }
    schedule();
  };
  const ended = (message) => {
    controller = null;
    watch.disabled = false;
    pause.disabled = true;
    stop.disabled = true;
    state.textContent = message;
  };

  const start = async () => {
    controller = new AbortController();
    const mine = controller;
    watch.disabled = true;
    stop.disabled = false;
    state.textContent = "Connecting…";
    try {
      const response = await api.stream(
        `/queries/${encodeURIComponent(name)}/subscribe`,
        mine.signal,
      );
      pause.disabled = false;
      state.textContent = "Watching live.";
      for await (const event of events(response)) {
        const data = JSON.parse(event.data);
        if (event.event === "rows") received(data.rows || []);
        else if (["closed", "dropped", "error"].includes(event.event)) {
          ended(`Ended (${event.event}): ${data.reason || data.message || ""}`);
          return;
        }
      }
      if (controller === mine) ended("The server ended the stream.");
    } catch (err) {
      if (err.name === "AbortError") return;
      if (ctx.fail(err)) {
        ended("The server cannot be reached.");
        return;
      }
      ended("Not watching.");
      show(state, errorBox(err, "tail-error"));
    }
  };
  watch.addEventListener("click", start);
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (paused) state.textContent = "Paused: 0 new rows not shown yet.";
    else {
      unseen = 0;
      state.textContent = "Watching live.";
      schedule();
    }
  });
  const abort = () => {
    if (controller) controller.abort();
  };
  stop.addEventListener("click", () => {
    abort();
    ended("Stopped watching.");
  });
  ctx.onLeave(abort);
  if (status === "running") start();

  return h(
    "section",
    { class: "card" },
    h("h2", {}, "Live results"),
    status === "running" ? null : h("p", { class: "notice" }, `The query is ${status}.`),
    h("div", { class: "actions" }, watch, pause, stop, " ", count),
    state,
    body,
  );
}

function cell(row, column) {
  const masked = Array.isArray(row._masked) && row._masked.includes(column);
  if (masked) {
    return h(
      "td",
      { class: "masked", title: "hidden from your roles" },
      h("span", { class: "tag" }, "masked"),
    );
  }
  const value = row[column];
  if (value === null || value === undefined) {
    return h("td", { class: "null" }, h("span", { class: "tag" }, "null"));
  }
  return h("td", {}, typeof value === "object" ? JSON.stringify(value) : String(value));
}
