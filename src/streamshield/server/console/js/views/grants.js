// Grants on one catalog object (administrators): list, grant, revoke. The object is
// chosen in the page's address (#/grants/KIND/NAME; SYSTEM by default) so a listing can
// be linked. The API checks CHANGE SYSTEM before it looks the object up: a
// non-administrator who forces the page gets its 403, never a hint whether the object
// exists.

import * as api from "../api.js";
import { errorBox, h, show, table } from "../dom.js";
import { actionButton, actionForm } from "../forms.js";

const KINDS = ["system", "schema", "stream", "query"];
const PERMISSIONS = [
  "VIEW CATALOG",
  "VIEW OBJECT",
  "ADD",
  "SET QUERY STATUS",
  "SUBSCRIBE",
  "READ TUPLE",
  "READ AGGREGATE",
  "WRITE",
  "INJECT SP",
  "CHANGE PERM",
  "CHANGE SYSTEM",
];
const grantsHash = (kind, name) => `#/grants/${encodeURIComponent(kind)}/${encodeURIComponent(name)}`;

export async function grantsView(ctx, kind = "system", object = "system", notice = null) {
  const query = `/grants?kind=${encodeURIComponent(kind)}&object=${encodeURIComponent(object)}`;
  const chooser = actionForm(ctx, {
    id: "grants-object",
    title: "Object",
    submit: "Show its grants",
    fields: [
      { name: "kind", label: "Kind", type: "select", options: KINDS, value: kind },
      { name: "object", label: "Name", required: true, value: object },
    ],
    send: async (data) => ctx.go(grantsHash(data.kind, data.object)),
  });
  // SYSTEM is one object: "the system", not "system system".
  const title = kind === "system" ? ["Grants on the system"] : ["Grants on ", kind, " ", h("code", {}, object)];
  show(ctx.view, h("h1", {}, title), chooser, h("p", { class: "muted" }, "Loading…"));
  let answer;
  try {
    answer = await api.call("GET", query);
  } catch (err) {
    if (!ctx.fail(err)) show(ctx.view, h("h1", {}, title), chooser, errorBox(err, "grants-error"));
    return;
  }
  const problem = h("div", { id: "grants-problem", "aria-live": "polite" });
  const again = (message) => grantsView(ctx, kind, object, message);
  const body = (g) => ({
    kind,
    object,
    permission: g.permission,
    [g.grantee_kind]: g.grantee,
  });
  const rows = answer.grants.map((g) => [
    g.permission,
    `${g.grantee_kind} ${g.grantee}`,
    g.grantor || "—",
    g.grant_option ? "yes" : "no",
    actionButton(
      ctx,
      "Revoke",
      { class: "danger", "data-revoke": `${g.permission}/${g.grantee_kind}/${g.grantee}` },
      problem,
      async () => {
        await api.call("DELETE", "/grants", body(g));
        await again(`${g.permission} revoked from ${g.grantee_kind} ${g.grantee}.`);
      },
    ),
  ]);
  const grant = actionForm(ctx, {
    id: "grant",
    title: "Grant",
    submit: "Grant",
    fields: [
      { name: "permission", label: "Permission", type: "select", options: PERMISSIONS },
      { name: "grantee_kind", label: "To a", type: "select", options: ["role", "user"] },
      { name: "grantee", label: "Role or user name", required: true },
      { name: "grant_option", label: "with grant option", type: "checkbox" },
    ],
    send: async (data) => {
      const sent = {
        kind,
        object,
        permission: data.permission,
        [data.grantee_kind]: data.grantee,
        grant_option: data.grant_option,
      };
      await api.call("POST", "/grants", sent);
      await again(`${data.permission} granted to ${data.grantee_kind} ${data.grantee}.`);
    },
  });
  show(
    ctx.view,
    h("h1", {}, title),
    notice ? h("p", { class: "notice", id: "grants-notice" }, notice) : null,
    chooser,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Stored grants"),
      h(
        "p",
        { class: "muted" },
        "The owner holds every permission on her object without a grant; a grant on system is global.",
      ),
      table(["Permission", "Grantee", "Grantor", "Grant option", ""], rows, "No grant on this object.", {
        id: "grants",
      }),
      problem,
    ),
    grant,
  );
}
