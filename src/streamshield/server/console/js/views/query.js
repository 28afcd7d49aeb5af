// One query: status and last error class, its text for owner and administrators, the
// actions the session holds (start, stop, remove) and the live tail of its results,
// watched as soon as the page opens. Status, progress and subscribers are read again
// with every sample of the chart (GET /queries/{name}, every 3 s while the page is
// shown); a query that runs as a branch of a shared network has the network's progress,
// so those figures say so.

import * as api from "../api.js";
import { errorBox, h, localTime, pending, show } from "../dom.js";
import { confirmedButton } from "../forms.js";
import { throughputChart } from "./chart.js";
import { tail } from "./tail.js";

export async function queryView(ctx, name) {
  const path = `/queries/${encodeURIComponent(name)}`;
  const title = h("h1", {}, "Query ", h("code", {}, name));
  show(ctx.view, title, h("p", { class: "muted" }, "Loading…"));
  let info;
  let rights;
  try {
    [info, rights] = await Promise.all([
      api.call("GET", path),
      api.call("GET", `/me${path}`),
    ]);
  } catch (err) {
    if (ctx.fail(err)) return;
    show(ctx.view, title, errorBox(err, "query-error"));
    return;
  }
  const problem = h("div", { id: "action-problem", "aria-live": "polite" });
  // This drawing's chart and tail end when it is redrawn (Start, Stop, Refresh), not
  // only when the user leaves: a redraw never leaves a second subscription open.
  // Once ended, a drawing redraws nothing: a sample that saw the status change and the
  // action that changed it both ask, and only the first one draws.
  const leaving = [];
  const here = { ...ctx, onLeave: (fn) => leaving.push(fn) };
  let ended = false;
  const end = () => {
    ended = true;
    for (const fn of leaving.splice(0)) fn();
  };
  ctx.onLeave(end);
  const reload = () => {
    if (ended) return;
    end();
    queryView(ctx, name);
  };
  const act = (label, busy, id, method, suffix) => {
    const button = h("button", { type: "button", id }, label);
    button.addEventListener("click", async () => {
      show(problem);
      try {
        await pending(button, busy, () => api.call(method, path + suffix));
        reload();
      } catch (err) {
        if (!ctx.fail(err)) show(problem, errorBox(err, "action-error"));
      }
    });
    return button;
  };
  const actions = [];
  if (rights.set_status && info.status !== "running")
    actions.push(act("Start", "Starting…", "start", "POST", "/start"));
  if (rights.set_status && info.status === "running")
    actions.push(act("Stop", "Stopping…", "stop", "POST", "/stop"));
  if (rights.remove) actions.push(removeButton(ctx, path, problem));
  actions.push(h("button", { type: "button", id: "refresh", onclick: reload }, "Refresh"));

  const facts = h("dl", { class: "facts", id: "query-facts" });
  const showFacts = (q) => {
    const of = q.network ? " (network)" : "";
    show(
      facts,
      [
        ["Status", h("span", { id: "query-status", class: `status ${q.status}` }, q.status)],
        ["Last error class", h("span", { id: "query-error-class" }, q.error_class || "none")],
        ["Failed at", localTime(q.failed_at) || "—"],
        ["Owner", q.owner],
        ["Inputs", q.inputs.join(", ")],
        ["Output stream", q.output || "—"],
        [
          "Runs in",
          h(
            "span",
            { id: "query-network" },
            q.network ? `the shared network of ${q.network}` : "its own Spark query",
          ),
        ],
        [`Last batch${of}`, h("span", { id: "query-last-batch" }, q.last_batch ?? "—")],
        [`Rows/s in${of}`, fixed(q.input_rows_per_second)],
        [`Rows/s processed${of}`, fixed(q.processed_rows_per_second)],
        [`Batch duration${of}`, q.batch_duration_ms == null ? "—" : `${q.batch_duration_ms} ms`],
        ["Subscribers", h("span", { id: "query-subscribers" }, q.subscribers)],
      ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
    );
  };
  showFacts(info);
  const refreshed = (q) => {
    if (q.status !== info.status) reload(); // the actions offered change with the status
    else showFacts(q);
  };
  show(
    ctx.view,
    title,
    h(
      "section",
      { class: "card" },
      facts,
      info.text ? [h("h2", {}, "Text"), h("pre", { id: "query-text" }, info.text)] : null,
      h("div", { class: "actions" }, actions),
      problem,
    ),
    throughputChart(here, name, refreshed, info.network),
    rights.subscribe
      ? tail(here, name, info.status)
      : h(
          "p",
          { class: "empty", id: "no-tail" },
          "Your roles may not subscribe to this query's results.",
        ),
  );
}

function removeButton(ctx, path, problem) {
  return confirmedButton(ctx, {
    ask: "Remove…",
    confirm: "Yes, remove it",
    busy: "Removing…",
    attrs: { id: "remove" },
    confirmAttrs: { id: "remove-confirm" },
    problem,
    errorId: "action-error",
    run: async () => {
      await api.call("DELETE", path);
      ctx.go("#/catalog");
    },
  });
}

function fixed(value) {
  return value == null ? "—" : Number(value).toFixed(1);
}
