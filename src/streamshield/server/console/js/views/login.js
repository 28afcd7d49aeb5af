// Log in: user, password and the roles to activate for this session.

import * as api from "../api.js";
import { errorBox, h, pending, show } from "../dom.js";

export function loginView(ctx, notice) {
  const status = h("div", { id: "login-status", "aria-live": "polite" });
  const submit = h("button", { type: "submit" }, "Log in");
  if (notice) show(status, h("p", { class: "notice" }, notice));
  const form = h(
    "form",
    { id: "login", class: "card narrow" },
    h("h1", {}, "Log in"),
    h("label", { for: "login-user" }, "User"),
    h("input", { id: "login-user", name: "user", autocomplete: "username", required: true }),
    h("label", { for: "login-password" }, "Password"),
    h("input", {
      id: "login-password",
      name: "password",
      type: "password",
      autocomplete: "current-password",
      required: true,
    }),
    h("label", { for: "login-roles" }, "Roles to activate (comma-separated)"),
    h("input", { id: "login-roles", name: "roles", required: true, spellcheck: "false" }),
    submit,
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const roles = String(data.get("roles"))
      .split(/[,\s]+/)
      .filter(Boolean);
    show(status, h("p", { class: "muted" }, "Logging in…"));
    try {
      await pending(submit, "Logging in…", async () => {
        await api.login(String(data.get("user")), String(data.get("password")), roles);
        await ctx.loggedIn();
      });
    } catch (err) {
      if (ctx.fail(err)) {
        show(status);
        return;
      }
      show(status, errorBox(err, "login-error"));
      form.elements.password.value = "";
      form.elements.password.focus();
    }
  });
  show(ctx.view, form);
  form.elements.user.focus();
}
