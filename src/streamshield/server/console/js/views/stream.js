// One stream: an input stream's schema (attributes and types, tuple id, event time) or
// what an output stream carries and which query writes it, as GET /streams/{name}
// answers. A stream the session may not see is the API's 404, like one that does not
// exist. Not here yet: the policy in force per channel and ingest counts (the API has
// no read route for them; see docs/console.md).

import * as api from "../api.js";
import { h, show, table } from "../dom.js";
import { loaded } from "../forms.js";

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
  );
}
