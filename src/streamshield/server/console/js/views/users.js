// Users (administrators): read-only in this slice. Other users are not offered the
// page; one who opens it anyway sees the API's own refusal.

import * as api from "../api.js";
import { errorBox, h, show, table } from "../dom.js";

export async function usersView(ctx) {
  show(ctx.view, h("h1", {}, "Users"), h("p", { class: "muted" }, "Loading…"));
  let answer;
  try {
    answer = await api.call("GET", "/users");
  } catch (err) {
    if (ctx.fail(err)) return;
    show(ctx.view, h("h1", {}, "Users"), errorBox(err, "users-error"));
    return;
  }
  const rows = answer.users.map((u) => [u.name, u.roles.join(", "), u.disabled ? "yes" : "no"]);
  show(
    ctx.view,
    h("h1", {}, "Users"),
    table(["User", "Roles", "Disabled"], rows, "No users.", { id: "users" }),
  );
}
