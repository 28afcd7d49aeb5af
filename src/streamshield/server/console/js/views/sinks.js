// Sinks (every user): a query's rows written for her into a Delta table or a Kafka
// topic (GET /sinks: her own; administrators see everyone's, with whose), each with its
// query, target, status and what it wrote (rows, the last batch), read again every 3 s
// while the page is shown; a form per target kind attaches one to a query she may
// SUBSCRIBE to (the running queries whose GET /me/queries/{name} says so), and a
// two-step detach removes one. The API decides where a sink may write (the settings
// sinks.delta_roots, sinks.kafka_brokers) and whether she may subscribe: its refusal is
// shown under the form. A Kafka password is sent once and never shown back.

import * as api from "../api.js";
import { errorBox, h, show } from "../dom.js";
import { actionForm, confirmedButton, loaded } from "../forms.js";
import { everyFewSeconds, keyedList } from "../live.js";
import { SECURITY_FIELDS, security, securityText } from "./kafka_security.js";

const queryLink = (name) => h("a", { href: `#/query/${encodeURIComponent(name)}` }, name);

/** The running queries the session may SUBSCRIBE to, by the API's own answer. */
async function subscribable(catalog) {
  const running = catalog.queries.filter((q) => q.status === "running").map((q) => q.name);
  const rights = await Promise.all(
    running.map((name) =>
      api.call("GET", `/me/queries/${encodeURIComponent(name)}`).catch((err) => {
        if (err instanceof api.ApiError && err.status === 404) return null; // gone since
        throw err;
      }),
    ),
  );
  return running.filter((_, i) => rights[i] && rights[i].subscribe);
}

/** ``ok``, or what keeps the sink from writing (the API's own words), and how bad. */
function statusClass(status) {
  if (status === "ok") return "ok";
  return status.startsWith("waiting") ? "pending" : "bad";
}

function target(t) {
  if (t.kind === "delta") return ["Delta table ", h("code", {}, t.uri)];
  const auth = securityText(t.security);
  const on = ` on ${t.bootstrap_servers}${auth ? ` (${auth})` : ""}`;
  return ["Kafka topic ", h("code", {}, t.topic), on];
}

export async function sinksView(ctx) {
  const answer = await loaded(ctx, "Sinks", "sinks", async () => {
    const [sinks, catalog] = await Promise.all([
      api.call("GET", "/sinks"),
      api.call("GET", "/catalog"),
    ]);
    return { sinks, queries: await subscribable(catalog) };
  });
  if (!answer) return;
  const admin = ctx.me.administrator;
  const notice = h("div", { id: "sinks-notice", "aria-live": "polite" });
  const problem = h("div", { id: "sinks-problem", "aria-live": "polite" });
  const readProblem = h("div", { "aria-live": "polite" });
  const said = (text) => show(notice, h("p", { class: "notice" }, text));
  const columns = ["Sink", "Query", ...(admin ? ["User"] : []), "Target", "Status"];
  columns.push("Rows written", "Last batch", "");
  const body = h("tbody", {});
  const frame = h(
    "table",
    { id: "sinks" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    body,
  );
  const none = admin ? "No sink is attached." : "You have no sink.";
  const empty = h("p", { class: "empty", id: "no-sinks" }, none);
  const list = keyedList({ frame, body, empty }, (sink) => {
    const detach = confirmedButton(ctx, {
      ask: "Detach…",
      confirm: "Yes, detach it",
      busy: "Detaching…",
      attrs: { "data-detach": sink.name },
      confirmAttrs: { "data-detach-confirm": sink.name },
      problem,
      run: async () => {
        await api.call("DELETE", `/sinks/${encodeURIComponent(sink.name)}`);
        await read();
        said(`Sink ${sink.name} detached; what it wrote stays.`);
      },
    });
    // The cells are kept and refilled: the detach button (perhaps asking) is never moved.
    const cells = columns.slice(0, -1).map(() => h("td", {}));
    const row = h("tr", { "data-sink": sink.name }, cells, h("td", {}, detach));
    const update = (s) => {
      const cls = `sink-status ${statusClass(s.status)}`;
      const status = h("span", { class: cls, "data-status": s.status }, s.status);
      const values = [
        s.name,
        queryLink(s.query),
        ...(admin ? [s.user] : []),
        target(s.target),
        status,
        String(s.rows_written),
        s.last_batch < 0 ? "none yet" : String(s.last_batch),
      ];
      values.forEach((value, i) => show(cells[i], value));
    };
    return { node: row, update };
  });
  const shown = (sinks) => list.show(sinks.map((s) => [s.name, s]));
  const read = everyFewSeconds(ctx, async (newest) => {
    let got;
    try {
      got = await api.call("GET", "/sinks");
    } catch (err) {
      if (newest() && !ctx.fail(err)) show(readProblem, errorBox(err, "sinks-error"));
      return;
    }
    if (!newest()) return;
    show(readProblem);
    shown(got.sinks);
  });
  shown(answer.sinks.sinks);
  const attached = async (query, name, targetBody) => {
    const path = `/queries/${encodeURIComponent(query)}/sinks`;
    const made = await api.call("POST", path, { name, target: targetBody });
    await read();
    said(`Sink ${made.name} attached to ${made.query}: it writes from the query's next batch on.`);
  };
  const common = [
    { name: "name", label: "Sink name", required: true },
    { name: "query", label: "Query", required: true, list: "sink-queries" },
  ];
  show(
    ctx.view,
    h("h1", {}, "Sinks"),
    h(
      "p",
      { class: "muted" },
      "A sink writes a query's rows exactly as your own subscription would receive them ",
      "(your roles, level and masks), while you may still subscribe.",
    ),
    notice,
    readProblem,
    h(
      "section",
      { class: "card" },
      h("h2", {}, admin ? "Every sink" : "Your sinks"),
      list.node,
      problem,
    ),
    h("datalist", { id: "sink-queries" }, answer.queries.map((q) => h("option", { value: q }))),
    answer.queries.length
      ? null
      : h("p", { class: "empty", id: "no-sink-queries" }, "No running query you may subscribe to."),
    actionForm(ctx, {
      id: "sink-delta",
      title: "Attach a Delta table",
      note: "Only under a location an administrator allowed for sinks.",
      submit: "Attach",
      clear: true,
      fields: [...common, { name: "uri", label: "Table path or URI", required: true }],
      send: (data) => attached(data.query, data.name, { kind: "delta", uri: data.uri }),
    }),
    actionForm(ctx, {
      id: "sink-kafka",
      title: "Attach a Kafka topic",
      note: "Only on brokers an administrator allowed for sinks. The password is never shown again.",
      submit: "Attach",
      clear: true,
      fields: [
        ...common,
        { name: "bootstrap_servers", label: "Brokers", required: true, placeholder: "host:port,…" },
        { name: "topic", label: "Topic", required: true },
        ...SECURITY_FIELDS,
      ],
      send: (data) =>
        attached(data.query, data.name, {
          kind: "kafka",
          bootstrap_servers: data.bootstrap_servers,
          topic: data.topic,
          security: security(data),
        }),
    }),
  );
}
