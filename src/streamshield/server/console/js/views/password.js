// Passwords: every user changes her own (POST /me/password, proving the current one;
// her other sessions end); an administrator also resets another user's
// (POST /users/{name}/password; that user's sessions all end). The reset form is
// offered only to sessions holding CHANGE SYSTEM, and the API refuses it to anyone else.
// The server's password policy decides: its refusal (too short, the user's name, a
// wrong current password, too many tries) is shown under the form.

import * as api from "../api.js";
import { h, show } from "../dom.js";
import { actionForm } from "../forms.js";

export async function passwordView(ctx, notice) {
  const again = (message) => passwordView(ctx, message);
  const own = actionForm(ctx, {
    id: "password-change",
    title: "Change your password",
    submit: "Change password",
    fields: [
      { name: "current", label: "Current password", type: "password", autocomplete: "current-password", required: true },
      { name: "new", label: "New password", type: "password", autocomplete: "new-password", required: true },
    ],
    send: async (data) => {
      await api.call("POST", "/me/password", { current: data.current, new: data.new });
      await again("Your password was changed; your other sessions have ended.");
    },
  });
  let reset = null;
  if (ctx.me.administrator) {
    let users = [];
    try {
      users = (await api.call("GET", "/users")).users.map((u) => u.name).filter((n) => n !== ctx.me.user);
    } catch (err) {
      if (ctx.fail(err)) return;
    }
    reset = actionForm(ctx, {
      id: "password-reset",
      title: "Reset a user's password",
      submit: "Reset password",
      fields: [
        { name: "user", label: "User", type: "select", options: users, required: true },
        { name: "password", label: "New password", type: "password", autocomplete: "new-password", required: true },
      ],
      send: async (data) => {
        await api.call("POST", `/users/${encodeURIComponent(data.user)}/password`, { password: data.password });
        await again(`The password of ${data.user} was reset; every session of ${data.user} has ended.`);
      },
    });
  }
  show(
    ctx.view,
    h("h1", {}, "Password"),
    notice ? h("p", { class: "notice", id: "password-notice" }, notice) : null,
    h(
      "p",
      { class: "muted" },
      "At least 12 characters, not your user name; the server's policy decides and says why it refuses.",
    ),
    own,
    reset,
  );
}
