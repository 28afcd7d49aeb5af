// Users (administrators): create a user, set her roles, disable and enable her. Other
// users are not offered the page; one who opens it anyway sees the API's own refusal.
// Every change is one API call; the page is then read again from the server.

import * as api from "../api.js";
import { h, show, table } from "../dom.js";
import { actionButton, actionForm, loaded, names } from "../forms.js";

const userPath = (name) => `/users/${encodeURIComponent(name)}`;

export async function usersView(ctx, notice) {
  const answer = await loaded(ctx, "Users", "users", () => api.call("GET", "/users"));
  if (!answer) return;
  const problem = h("div", { id: "users-problem", "aria-live": "polite" });
  const again = (message) => usersView(ctx, message);
  const rows = answer.users.map((u) => {
    const roles = h("input", {
      value: u.roles.join(", "),
      "aria-label": `Roles of ${u.name}`,
      "data-roles": u.name,
      spellcheck: "false",
    });
    const setRoles = actionButton(ctx, "Set roles", { "data-set-roles": u.name }, problem, async () => {
      await api.call("PUT", `${userPath(u.name)}/roles`, { roles: names(roles.value) });
      await again(`Roles of ${u.name} set.`);
    });
    const toggle = u.disabled ? "enable" : "disable";
    const flip = actionButton(
      ctx,
      u.disabled ? "Enable" : "Disable",
      { "data-toggle": u.name, class: u.disabled ? null : "danger" },
      problem,
      async () => {
        await api.call("POST", `${userPath(u.name)}/${toggle}`);
        await again(`${u.name} ${toggle}d.`);
      },
    );
    return [u.name, h("div", { class: "inline" }, roles, setRoles), u.disabled ? "yes" : "no", flip];
  });
  const create = actionForm(ctx, {
    id: "user-create",
    title: "Create a user",
    submit: "Create",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "password", label: "Password", type: "password", autocomplete: "new-password", required: true },
      { name: "roles", label: "Roles (comma-separated)" },
    ],
    send: async (data) => {
      const body = { name: data.name, password: data.password, roles: names(data.roles) };
      await api.call("POST", "/users", body);
      await again(`User ${data.name} created.`);
    },
  });
  show(
    ctx.view,
    h("h1", {}, "Users"),
    notice ? h("p", { class: "notice", id: "users-notice" }, notice) : null,
    h(
      "section",
      { class: "card" },
      table(["User", "Roles", "Disabled", ""], rows, "No users.", { id: "users" }),
      problem,
    ),
    create,
  );
}
