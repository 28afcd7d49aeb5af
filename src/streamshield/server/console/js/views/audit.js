// The audit trail, newest first: administrators read every entry, everyone else their
// own (the API decides). Filters by user, action and time (entered in local time, sent
// as UTC); older pages through `before_id`.

import * as api from "../api.js";
import { errorBox, h, localTime, pending, show, table } from "../dom.js";

export async function auditView(ctx) {
  const results = h("div", { id: "audit-results" });
  const pager = h("div", { class: "actions" });
  const pages = []; // before_id of each page shown so far (undefined: the newest)
  const apply = h("button", { type: "submit", id: "audit-apply" }, "Apply");
  const form = h(
    "form",
    { id: "audit-filters", class: "card filters" },
    field("audit-user", "user", "User"),
    field("audit-action", "action", "Action", { placeholder: "e.g. login" }),
    field("audit-since", "since", "Since", { type: "datetime-local", step: 1 }),
    field("audit-until", "until", "Until", { type: "datetime-local", step: 1 }),
    h(
      "div",
      {},
      h("label", { for: "audit-limit" }, "Per page"),
      h(
        "select",
        { id: "audit-limit", name: "limit" },
        [10, 25, 50, 100, 200].map((n) => h("option", { value: n, selected: n === 50 }, n)),
      ),
    ),
    apply,
  );

  async function load(beforeId) {
    const data = new FormData(form);
    const params = new URLSearchParams();
    for (const key of ["user", "action"]) {
      const value = String(data.get(key) || "").trim();
      if (value) params.set(key, value);
    }
    for (const key of ["since", "until"]) {
      const value = String(data.get(key) || "");
      if (value) params.set(key, new Date(value).toISOString());
    }
    params.set("limit", String(data.get("limit")));
    if (beforeId) params.set("before_id", String(beforeId));
    show(results, h("p", { class: "muted" }, "Loading…"));
    let page;
    try {
      page = await pending(apply, "Loading…", () => api.call("GET", `/audit?${params}`));
    } catch (err) {
      if (ctx.fail(err)) return;
      show(results, errorBox(err, "audit-error"));
      show(pager);
      return;
    }
    const rows = page.entries.map((e) => [
      h("time", { datetime: e.at }, localTime(e.at)),
      e.actor || "",
      e.action,
      e.outcome,
      e.object ? `${e.object.kind} ${e.object.name}` : "",
      e.client || "",
      // JSON has few spaces: it may break anywhere, in a column of its own width.
      Object.keys(e.detail).length ? h("span", { class: "detail" }, JSON.stringify(e.detail)) : "",
    ]);
    show(
      results,
      table(
        ["Time", "User", "Action", "Outcome", "Object", "Client", "Detail"],
        rows,
        "No audit entry matches.",
        { id: "audit" },
      ),
    );
    const newer = pages.length > 1;
    show(
      pager,
      h("button", { type: "button", id: "audit-newest", disabled: !newer, onclick: first }, "Newest"),
      h(
        "button",
        {
          type: "button",
          id: "audit-older",
          disabled: page.next_before_id == null,
          onclick: () => {
            pages.push(page.next_before_id);
            load(page.next_before_id);
          },
        },
        "Older",
      ),
      h("span", { class: "muted" }, ` page ${pages.length}`),
    );
  }
  function first() {
    pages.splice(0, pages.length, undefined);
    load(undefined);
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    first();
  });

  show(
    ctx.view,
    h("h1", {}, ctx.me.administrator ? "Audit trail" : "My audit trail"),
    form,
    h("section", { class: "card" }, results, pager),
  );
  first();
}

function field(id, name, label, attrs = {}) {
  return h(
    "div",
    {},
    h("label", { for: id }, label),
    h("input", { id, name, spellcheck: "false", ...attrs }),
  );
}
