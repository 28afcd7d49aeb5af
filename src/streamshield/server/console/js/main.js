// The console's shell: who is logged in, the navigation, the banner and the router.
// Pages are views rendered into <main> from the hash (#/catalog, #/query/NAME, ...), so
// the page is never reloaded and the in-memory token (api.js) survives navigation.

import * as api from "./api.js";
import { h, localTime, show } from "./dom.js";
import { auditView } from "./views/audit.js";
import { catalogView } from "./views/catalog.js";
import { grantsView } from "./views/grants.js";
import { loginView } from "./views/login.js";
import { networksView } from "./views/networks.js";
import { passwordView } from "./views/password.js";
import { queryView } from "./views/query.js";
import { rolesView } from "./views/roles.js";
import { streamView } from "./views/stream.js";
import { usersView } from "./views/users.js";

const state = { me: null, cleanups: [], notice: null };

const routes = [
  { pattern: /^#\/catalog$/, view: catalogView },
  { pattern: /^#\/query\/([^/]+)$/, view: queryView },
  { pattern: /^#\/audit$/, view: auditView },
  { pattern: /^#\/users$/, view: usersView },
  { pattern: /^#\/roles$/, view: rolesView },
  { pattern: /^#\/stream\/([^/]+)$/, view: streamView },
  { pattern: /^#\/networks$/, view: networksView },
  { pattern: /^#\/password$/, view: passwordView },
  { pattern: /^#\/grants$/, view: grantsView },
  { pattern: /^#\/grants\/([^/]+)\/([^/]+)$/, view: grantsView },
];

function banner(message, retry) {
  const el = document.getElementById("banner");
  if (!message) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  show(el, message, " ", retry ? h("button", { type: "button", onclick: retry }, "Retry") : null);
  el.hidden = false;
}

function header() {
  const nav = document.getElementById("nav");
  const who = document.getElementById("who");
  if (!state.me) {
    nav.replaceChildren();
    who.replaceChildren();
    return;
  }
  const links = [
    ["#/catalog", "Catalog"],
    ["#/audit", state.me.administrator ? "Audit" : "My audit trail"],
  ];
  // Only owners of queries have switches to see (administrators: all of them).
  if (state.me.administrator || state.me.add_queries) links.push(["#/networks", "Networks"]);
  if (state.me.administrator)
    links.push(["#/users", "Users"], ["#/roles", "Roles"], ["#/grants", "Grants"]);
  const here = location.hash.split("/").slice(0, 2).join("/");
  show(
    nav,
    links.map(([href, label]) =>
      h("a", { href, "aria-current": href === here ? "page" : null }, label),
    ),
  );
  show(
    who,
    h("span", { id: "who-user" }, state.me.user),
    " as ",
    h("span", { id: "who-roles" }, state.me.roles.join(", ")),
    h("span", { class: "muted" }, ` until ${localTime(state.me.expires_at)}`),
    " ",
    h("a", { href: "#/password", id: "password-link" }, "Password"),
    " ",
    h("button", { type: "button", id: "logout", onclick: logout }, "Log out"),
  );
}

async function logout() {
  await api.logout();
  loggedOut("You are logged out.");
}

function loggedOut(message) {
  state.me = null;
  state.notice = message;
  if (location.hash !== "#/login") location.hash = "#/login";
  else render();
}

function cleanup() {
  for (const fn of state.cleanups.splice(0)) fn();
}

/** What a view gets: the session's rights, its element and the shell's services. */
function context(view) {
  return {
    me: state.me,
    view,
    onLeave: (fn) => state.cleanups.push(fn),
    go: (hash) => {
      location.hash = hash;
    },
    fail: (err) => failed(view, err),
    loggedIn: async () => {
      state.me = await api.call("GET", "/me");
      location.hash = "#/catalog";
    },
  };
}

function failed(view, err) {
  if (!view.isConnected) return true; // the user has moved on: nothing to show
  if (err instanceof api.Unreachable) {
    banner("The server cannot be reached.", () => render());
    return true;
  }
  if (err instanceof api.ApiError && err.ended) return true; // back to login, with why
  return false;
}

async function render() {
  cleanup();
  banner(null);
  // Each render draws into a fresh element: a slower earlier view that finishes after
  // the user moved on writes into a detached element, never over the current page.
  const main = document.getElementById("view");
  const view = document.createElement("div");
  main.replaceChildren(view);
  const ctx = context(view);
  if (!api.loggedIn() || !state.me) {
    header();
    const notice = state.notice;
    state.notice = null;
    loginView(ctx, notice);
    return;
  }
  header();
  const route = routes.find((r) => r.pattern.test(location.hash));
  if (!route) {
    location.hash = "#/catalog";
    return;
  }
  const args = location.hash.match(route.pattern).slice(1).map(decodeURIComponent);
  try {
    await route.view(ctx, ...args);
  } catch (err) {
    if (!failed(view, err)) throw err;
  }
  if (view.isConnected) main.focus({ preventScroll: true });
}

api.onExpired((message) => loggedOut(`Your session ended (${message}). Log in again.`));
window.addEventListener("hashchange", render);
window.addEventListener("pagehide", () => api.logoutOnLeave());
render();
