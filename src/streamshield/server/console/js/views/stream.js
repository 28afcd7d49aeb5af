// One stream: an input stream's schema (attributes and types, tuple id, event time) or
// what an output stream carries and which query writes it, as GET /streams/{name}
// answers. A stream the session may not see is the API's 404, like one that does not
// exist. Below, from GET /streams/{name}/ingest, as deep as the session is entitled:
// the policy in force on each channel (its id, the roles it admits and denies, its
// sps), the ingest counts, and a chart of accepted and denied tuples. Who may not read
// the policies sees the API's 403 in their place, and the schema still.

import * as api from "../api.js";
import { errorBox, h, show, table } from "../dom.js";
import { loaded } from "../forms.js";
import { streamChart } from "./chart.js";

export async function streamView(ctx, name) {
  const path = `/streams/${encodeURIComponent(name)}`;
  const info = await loaded(ctx, `Stream ${name}`, "stream", () => api.call("GET", path));
  if (!info) return;
  const title = h("h1", {}, "Stream ", h("code", {}, info.name));
  if (info.kind === "output") {
    const query = info.query
      ? h("a", { href: `#/query/${encodeURIComponent(info.query)}` }, info.query)
      : "—";
    show(
      ctx.view,
      title,
      h(
        "section",
        { class: "card" },
        h("dl", { class: "facts" }, h("dt", {}, "Kind"), h("dd", {}, "output"), h("dt", {}, "Written by"), h("dd", {}, query)),
        h("h2", {}, "Columns a subscriber receives"),
        table(["Column"], info.columns.map((c) => [c]), "No columns.", { id: "stream-columns" }),
      ),
    );
    return;
  }
  const rows = info.attributes.map(([attribute, type]) => [
    attribute,
    type,
    [attribute === info.tid ? "tuple id" : null, attribute === info.event_time ? "event time" : null]
      .filter(Boolean)
      .join(", "),
  ]);
  show(
    ctx.view,
    title,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Schema"),
      table(["Attribute", "Type", "Role"], rows, "No attributes.", { id: "stream-schema" }),
    ),
    await ingestCards(ctx, name),
  );
}

const SCOPES = {
  all: "You see every channel's policy in full (owner or administrator).",
  own: "You see your own channels' policies in full; others only as a reader.",
  reader: "You see which of your active roles each channel's policy admits.",
};

/** The policies in force and the ingest counts and chart, or the API's refusal. */
async function ingestCards(ctx, name) {
  const path = `/streams/${encodeURIComponent(name)}/ingest`;
  let answer;
  try {
    answer = await api.call("GET", path);
  } catch (err) {
    if (ctx.fail(err)) return null;
    return h("section", { class: "card" }, h("h2", {}, "Policies in force"), errorBox(err, "stream-policy-error"));
  }
  const counts = h("dl", { class: "facts", id: "stream-counts" });
  const showCounts = (a) =>
    show(
      counts,
      [
        ["Elements accepted", a.counts.elements_accepted],
        ["Elements rejected", a.counts.elements_rejected],
        ["Tuples accepted by ingest", a.counts.tuples_accepted],
        ["Tuples denied by ingest", a.counts.tuples_denied],
        ["Elements in/s (last minute)", a.counts.rows_per_second.toFixed(2)],
      ].map(([k, v]) => [h("dt", {}, k), h("dd", { "data-count": k }, String(v))]),
    );
  showCounts(answer);
  return [
    h(
      "section",
      { class: "card", id: "stream-policies" },
      h("h2", {}, "Policies in force"),
      h("p", { class: "muted", id: "stream-scope" }, SCOPES[answer.scope]),
      answer.channels.length
        ? answer.channels.map(channel)
        : h("p", { class: "empty", id: "no-policies" }, "No channel holds a policy you may see."),
    ),
    h("section", { class: "card" }, h("h2", {}, "Ingest"), counts),
    streamChart(ctx, name, showCounts),
  ];
}

function roleList(roles, none) {
  return roles && roles.length ? roles.join(", ") : none;
}

function channel(c) {
  const facts = [
    ["Provider", c.provider ?? "(not shown to readers)"],
    ["Policy", h("code", {}, c.policy_id)],
    ["Admits", h("span", { class: "admits" }, roleList(c.admits, c.full ? "no role" : "none of your roles"))],
  ];
  if (c.full) {
    facts.push(["Denies", roleList(c.denies, "no role")]);
    if (c.unknown_roles) facts.push(["Warning", "an sp names an unknown role: nothing is readable"]);
  }
  const sps = c.full
    ? table(
        ["Sign", "Roles", "Tuples", "Attributes", "Privilege", "Grant option", "Immutable"],
        c.sps.map((sp) => [
          sp.sign,
          sp.roles,
          sp.tuples,
          sp.attributes,
          sp.privilege,
          sp.grant_option ? "yes" : "no",
          sp.immutable ? "yes" : "no",
        ]),
        "No sps.",
        { class: "sps" },
      )
    : null;
  return h(
    "div",
    { class: "channel", "data-policy": c.policy_id, "data-provider": c.provider ?? "" },
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    sps,
  );
}
