// The API client. The bearer token is kept in this module and in sessionStorage (per
// tab and per origin, gone when the tab closes) so that a reload keeps the session; a
// new tab of the console asks an open one for it over a BroadcastChannel (same origin
// only). It is never in localStorage (which outlives every tab) and never in a URL
// (logs, history, Referer). Any script of this origin could ask for it as this module
// does, so this origin serves only the package's own pages: the console under its
// strict CSP, and /docs from the package's copy of Swagger UI. Logging out ends the session on the server and clears the
// token in every tab holding it. The token is sent in the Authorization header only and no
// cookie is ever set, so another site cannot make the browser act with it (no CSRF),
// and the API sends no CORS headers, so it cannot read answers either.

const KEY = "streamshield.token";
const CHANNEL = "streamshield.session";

let token = sessionStorage.getItem(KEY);
let expired = () => {};
const tabs = typeof BroadcastChannel === "function" ? new BroadcastChannel(CHANNEL) : null;

function keep(value) {
  token = value;
  if (value === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, value);
}

if (tabs) {
  tabs.onmessage = ({ data }) => {
    if (data === "ask" && token !== null) tabs.postMessage({ token });
    else if (data && data.logout !== undefined && data.logout === token && token !== null) {
      // Only the tabs of the session that ended: another tab's own login stays.
      keep(null);
      expired("logged out in another tab");
    }
  };
}

/** A new tab of a logged-in console: the token of another open tab (if one answers
 * within ``waitMs``), kept for this tab too. */
export function askOtherTabs(waitMs = 400) {
  if (token !== null || !tabs) return Promise.resolve(token !== null);
  return new Promise((done) => {
    const asking = new BroadcastChannel(CHANNEL);
    const timer = setTimeout(() => {
      asking.close();
      done(false);
    }, waitMs);
    asking.onmessage = ({ data }) => {
      if (!data || typeof data.token !== "string" || token !== null) return;
      clearTimeout(timer);
      asking.close();
      keep(data.token);
      done(true);
    };
    asking.postMessage("ask");
  });
}

/** A refusal by the API: status, code, message and field problems as it sent them. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.error) || "http_" + status;
    this.problems = (body && body.problems) || [];
    this.ended = false;
  }
}

/** The server could not be reached (gone, restarting, network down). */
export class Unreachable extends Error {}

/** Called with the server's message when a logged-in session is refused (401). */
export function onExpired(handler) {
  expired = handler;
}

export function loggedIn() {
  return token !== null;
}

// The token each answer's request carried: a 401 ends the session only when it refused
// the token this tab holds now, so a slow answer to a request sent before a logout (or
// with another user's token) never logs out the user who has logged in since.
const sentWith = new WeakMap();

function headers(extra = {}, bearer = token) {
  return bearer ? { ...extra, Authorization: `Bearer ${bearer}` } : extra;
}

function sent(response, used) {
  sentWith.set(response, used);
  return response;
}

async function send(method, path, body, extra = {}, used = token) {
  const init = { method, headers: headers(extra, used), cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  try {
    return sent(await fetch(path, init), used);
  } catch (err) {
    throw new Unreachable(`the server cannot be reached (${err.message})`);
  }
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (response.ok) return body;
  const error = new ApiError(response.status, body);
  if (response.status === 401 && token !== null && sentWith.get(response) === token) {
    error.ended = true; // the session was refused, not the request: back to login
    keep(null);
    expired(error.message);
  }
  throw error;
}

/** One API call with the session's token; JSON in, JSON out, ApiError on refusal. */
export async function call(method, path, body) {
  return answer(await send(method, path, body));
}

/** Logs in with the roles to activate; keeps the token for this tab. */
export async function login(user, password, roles) {
  keep(null);
  const session = await answer(await send("POST", "/login", { user, password, roles }));
  keep(session.token);
  return session;
}

/** Forgets the token here and in every other tab holding it, then ends the session on
 * the server (even if that call fails, the token is gone). Forgotten first: while the
 * server ends the session, an answer refusing a request sent with it (a view's poll)
 * must not count as this tab's session ending, which would draw the login page twice. */
export async function logout() {
  if (token === null) return;
  const ended = token;
  keep(null);
  if (tabs) tabs.postMessage({ logout: ended });
  try {
    await send("POST", "/logout", undefined, {}, ended);
  } catch {
    // unreachable: the session ends at its expiry; the token is forgotten regardless
  }
}

/** Opens an SSE subscription (fetch, so the token goes in a header, never in a URL). */
export async function stream(path, signal) {
  let response;
  const used = token;
  try {
    response = sent(await fetch(path, {
      headers: headers({ Accept: "text/event-stream" }),
      cache: "no-store",
      credentials: "omit",
      signal,
    }), used);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new Unreachable(`the server cannot be reached (${err.message})`);
  }
  if (!response.ok) await answer(response);
  return response;
}
