// The catalog the user may see (streams and queries) and, for users who may add
// queries, registering one from its text with the server's refusal shown beside it.

import * as api from "../api.js";
import { errorBox, h, pending, show, table } from "../dom.js";

const queryLink = (name) => h("a", { href: `#/query/${encodeURIComponent(name)}` }, name);
const streamLink = (name) => h("a", { href: `#/stream/${encodeURIComponent(name)}` }, name);

export async function catalogView(ctx) {
  show(ctx.view, h("h1", {}, "Catalog"), h("p", { class: "muted" }, "Loading…"));
  const catalog = await api.call("GET", "/catalog");
  const streams = catalog.streams.map((s) => [streamLink(s.name), s.kind]);
  const queries = catalog.queries.map((q) => [
    queryLink(q.name),
    q.owner,
    q.inputs.join(", "),
    q.output || "",
    h("span", { class: `status ${q.status}` }, q.status),
  ]);
  show(
    ctx.view,
    h("h1", {}, "Catalog"),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Streams"),
      table(["Stream", "Kind"], streams, "No stream is visible to your roles.", {
        id: "streams",
      }),
    ),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Queries"),
      table(
        ["Query", "Owner", "Inputs", "Output", "Status"],
        queries,
        "No query is visible to your roles.",
        { id: "queries" },
      ),
    ),
    ctx.me.add_queries ? registerForm(ctx) : null,
  );
}

function registerForm(ctx) {
  const problem = h("div", { id: "register-problem", "aria-live": "polite" });
  const submit = h("button", { type: "submit", id: "register-submit" }, "Register");
  const form = h(
    "form",
    { id: "register", class: "card" },
    h("h2", {}, "Register a query"),
    h("label", { for: "register-name" }, "Name"),
    h("input", {
      id: "register-name",
      name: "name",
      required: true,
      pattern: "[A-Za-z][A-Za-z0-9_]{0,63}",
      spellcheck: "false",
    }),
    h("label", { for: "register-output" }, "Output stream (optional)"),
    h("input", { id: "register-output", name: "output", spellcheck: "false" }),
    h("label", { for: "register-text" }, "Query (SQL or CQL)"),
    h("textarea", {
      id: "register-text",
      name: "text",
      rows: 5,
      required: true,
      spellcheck: "false",
      "aria-describedby": "register-problem",
    }),
    problem,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { name: String(data.get("name")), text: String(data.get("text")) };
    const output = String(data.get("output") || "").trim();
    if (output) body.output = output;
    show(problem);
    form.elements.text.removeAttribute("aria-invalid");
    try {
      // Admission plans the query in Spark (an aggregate's first plan takes seconds).
      const answer = await pending(submit, "Registering…", () => api.call("POST", "/queries", body));
      if (answer.stream !== undefined) {
        show(
          problem,
          h("p", { class: "notice" }, `Policy injected on ${answer.stream} (csn ${answer.csn}).`),
        );
        return;
      }
      ctx.go(`#/query/${encodeURIComponent(answer.name)}`);
    } catch (err) {
      if (ctx.fail(err)) return;
      show(problem, errorBox(err, "register-error"));
      form.elements.text.setAttribute("aria-invalid", "true");
      form.elements.text.focus();
    }
  });
  return form;
}
