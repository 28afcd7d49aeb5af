// Roles and the role hierarchy. Every logged-in user may read it (role names are what
// users activate at login); only administrators are offered changes: create a role,
// add or remove a direct junior. A cycle or an unknown role is the server's refusal.

import * as api from "../api.js";
import { h, show, table } from "../dom.js";
import { actionButton, actionForm, loaded, names } from "../forms.js";

const rolePath = (name) => `/roles/${encodeURIComponent(name)}`;

export async function rolesView(ctx, notice) {
  const answer = await loaded(ctx, "Roles", "roles", () => api.call("GET", "/roles"));
  if (!answer) return;
  const admin = ctx.me.administrator;
  const problem = h("div", { id: "roles-problem", "aria-live": "polite" });
  const again = (message) => rolesView(ctx, message);
  const juniorOf = (role, junior) =>
    h(
      "span",
      { class: "junior" },
      junior,
      admin
        ? actionButton(
            ctx,
            "×",
            { "aria-label": `Remove ${junior} from ${role}`, "data-remove": `${role}/${junior}`, class: "small" },
            problem,
            async () => {
              await api.call("DELETE", `${rolePath(role)}/juniors/${encodeURIComponent(junior)}`);
              await again(`${junior} is no longer a junior of ${role}.`);
            },
          )
        : null,
    );
  const rows = answer.roles.map((r) => [
    r.name,
    r.juniors.length ? r.juniors.map((j) => juniorOf(r.name, j)) : h("span", { class: "muted" }, "none"),
  ]);
  const roleNames = answer.roles.map((r) => r.name);
  const forms = !admin
    ? []
    : [
        actionForm(ctx, {
          id: "role-create",
          title: "Create a role",
          submit: "Create",
          fields: [
            { name: "name", label: "Name", required: true },
            { name: "juniors", label: "Direct juniors (comma-separated)" },
          ],
          send: async (data) => {
            await api.call("POST", "/roles", { name: data.name, juniors: names(data.juniors) });
            await again(`Role ${data.name} created.`);
          },
        }),
        actionForm(ctx, {
          id: "junior-add",
          title: "Add a junior",
          submit: "Add",
          fields: [
            { name: "role", label: "Role", type: "select", options: roleNames },
            { name: "junior", label: "Junior", type: "select", options: roleNames },
          ],
          send: async (data) => {
            await api.call("POST", `${rolePath(data.role)}/juniors`, { junior: data.junior });
            await again(`${data.junior} is now a junior of ${data.role}.`);
          },
        }),
      ];
  show(
    ctx.view,
    h("h1", {}, "Roles"),
    notice ? h("p", { class: "notice", id: "roles-notice" }, notice) : null,
    h(
      "section",
      { class: "card" },
      h("p", { class: "muted" }, "A role holds every right of its juniors, transitively."),
      table(["Role", "Direct juniors"], rows, "No roles.", { id: "roles" }),
      problem,
    ),
    forms,
  );
}
