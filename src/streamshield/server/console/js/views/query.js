// One query: status and last error class, its text for owner and administrators, the
// actions the session holds (start, stop, remove) and the live tail of its results.

import * as api from "../api.js";
import { errorBox, h, localTime, show } from "../dom.js";
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
  const act = (label, id, method, suffix, after) =>
    h(
      "button",
      {
        type: "button",
        id,
        onclick: async () => {
          show(problem);
          try {
            await api.call(method, path + suffix);
            after();
          } catch (err) {
            if (!ctx.fail(err)) show(problem, errorBox(err, "action-error"));
          }
        },
      },
      label,
    );
  const reload = () => queryView(ctx, name);
  const actions = [];
  if (rights.set_status && info.status !== "running")
    actions.push(act("Start", "start", "POST", "/start", reload));
  if (rights.set_status && info.status === "running")
    actions.push(act("Stop", "stop", "POST", "/stop", reload));
  if (rights.remove) actions.push(removeButton(ctx, path, problem));
  actions.push(h("button", { type: "button", id: "refresh", onclick: reload }, "Refresh"));

  const facts = [
    ["Status", h("span", { id: "query-status", class: `status ${info.status}` }, info.status)],
    ["Last error class", h("span", { id: "query-error-class" }, info.error_class || "none")],
    ["Failed at", localTime(info.failed_at) || "—"],
    ["Owner", info.owner],
    ["Inputs", info.inputs.join(", ")],
    ["Output stream", info.output || "—"],
    ["Last batch", info.last_batch ?? "—"],
    ["Rows/s in", fixed(info.input_rows_per_second)],
    ["Rows/s processed", fixed(info.processed_rows_per_second)],
    ["Batch duration", info.batch_duration_ms == null ? "—" : `${info.batch_duration_ms} ms`],
    ["Subscribers", info.subscribers],
  ];
  show(
    ctx.view,
    title,
    h(
      "section",
      { class: "card" },
      h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      info.text ? [h("h2", {}, "Text"), h("pre", { id: "query-text" }, info.text)] : null,
      h("div", { class: "actions" }, actions),
      problem,
    ),
    throughputChart(ctx, name),
    rights.subscribe
      ? tail(ctx, name, info.status)
      : h(
          "p",
          { class: "empty", id: "no-tail" },
          "Your roles may not subscribe to this query's results.",
        ),
  );
}

function removeButton(ctx, path, problem) {
  // Two steps instead of confirm(): keyboard-friendly and never a blocking dialog.
  const confirm = h("button", { type: "button", id: "remove-confirm", class: "danger" }, "Yes, remove it");
  confirm.hidden = true;
  confirm.addEventListener("click", async () => {
    try {
      await api.call("DELETE", path);
      ctx.go("#/catalog");
    } catch (err) {
      if (!ctx.fail(err)) show(problem, errorBox(err, "action-error"));
    }
  });
  const ask = h("button", { type: "button", id: "remove" }, "Remove…");
  ask.addEventListener("click", () => {
    confirm.hidden = false;
    confirm.focus();
  });
  return h("span", {}, ask, " ", confirm);
}

function fixed(value) {
  return value == null ? "—" : Number(value).toFixed(1);
}
