// The console's shell: who is logged in, the navigation, the banner and the router.
// Pages are views rendered into <main> from the hash (#/catalog, #/query/NAME, ...). A
// reload or a new tab resumes the tab's session (api.js keeps the token per tab) by
// asking the server who it is; on a narrow screen the navigation folds behind a menu
// button.

import * as api from "./api.js";
import { h, localTime, show } from "./dom.js";
import { auditView } from "./views/audit.js";
import { catalogView } from "./views/catalog.js";
import { connectorsView } from "./views/connectors.js";
import { grantsView } from "./views/grants.js";
import { loginView } from "./views/login.js";
import { networksView } from "./views/networks.js";
import { passwordView } from "./views/password.js";
import { queryView } from "./views/query.js";
import { rolesView } from "./views/roles.js";
import { sinksView } from "./views/sinks.js";
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
  { pattern: /^#\/connectors$/, view: connectorsView },
  { pattern: /^#\/sinks$/, view: sinksView },
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
  const menu = document.getElementById("menu");
  document.getElementById("top").classList.remove("open");
  menu.setAttribute("aria-expanded", "false");
  menu.hidden = !state.me;
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
  // Anyone may write what she may subscribe to into a sink; binding brokers to streams
  // is an administrator's (CHANGE SYSTEM).
  links.push(["#/sinks", "Sinks"]);
  if (state.me.administrator) {
    links.push(["#/users", "Users"], ["#/roles", "Roles"], ["#/grants", "Grants"]);
    links.push(["#/connectors", "Connectors"]);
  }
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
      // The page asked for (a link opened in a new tab), else the catalog.
      if (!location.hash || location.hash === "#/login") location.hash = "#/catalog";
      else render();
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

/** A reload or a new tab: the tab's token (or another tab's) and whom it names, then
 * the page. A refused token has already led to the login page, saying why. */
async function start() {
  if (await api.askOtherTabs()) {
    try {
      state.me = await api.call("GET", "/me");
    } catch (err) {
      if (err instanceof api.ApiError && err.ended) return; // loggedOut() draws the login
      if (!(err instanceof api.Unreachable)) throw err;
      banner("The server cannot be reached.", () => start());
      return;
    }
  }
  render();
}

document.getElementById("menu").addEventListener("click", () => {
  const open = document.getElementById("top").classList.toggle("open");
  document.getElementById("menu").setAttribute("aria-expanded", String(open));
});
api.onExpired((message) => loggedOut(`Your session ended (${message}). Log in again.`));
window.addEventListener("hashchange", render);
start();
