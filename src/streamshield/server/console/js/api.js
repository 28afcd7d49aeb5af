// The API client. The bearer token lives in this module's memory only: not in
// localStorage (any script of the origin could read it, for ever) and not in
// sessionStorage either, which is per origin, not per page: this origin also serves
// /docs, whose Swagger UI loads scripts from a CDN, and a tab that went there would
// hand them the token. The cost: a reload asks for the password again, and leaving the
// page ends the session on the server. The token is sent in the Authorization header
// only and no cookie is ever set, so another site cannot make the browser act with it
// (no CSRF), and the API sends no CORS headers, so it cannot read answers either.

let token = null;
let expired = () => {};

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

function headers(extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function send(method, path, body, extra = {}) {
  const init = { method, headers: headers(extra), cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  try {
    return await fetch(path, init);
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
  if (response.status === 401 && token !== null) {
    error.ended = true; // the session was refused, not the request: back to login
    token = null;
    expired(error.message);
  }
  throw error;
}

/** One API call with the session's token; JSON in, JSON out, ApiError on refusal. */
export async function call(method, path, body) {
  return answer(await send(method, path, body));
}

/** Logs in with the roles to activate; keeps the token in memory. */
export async function login(user, password, roles) {
  token = null;
  const session = await answer(await send("POST", "/login", { user, password, roles }));
  token = session.token;
  return session;
}

/** Ends the session on the server, then forgets the token (even if the call fails). */
export async function logout() {
  if (token === null) return;
  try {
    await send("POST", "/logout");
  } catch {
    // unreachable: the session ends at its expiry; the token is forgotten regardless
  }
  token = null;
}

/** On leaving the page the in-memory token is lost anyway: end its session too. */
export function logoutOnLeave() {
  if (token === null) return;
  const init = { method: "POST", headers: headers(), keepalive: true, credentials: "omit" };
  token = null;
  fetch("/logout", init).catch(() => {});
}

/** Opens an SSE subscription (fetch, so the token goes in a header, never in a URL). */
export async function stream(path, signal) {
  let response;
  try {
    response = await fetch(path, {
      headers: headers({ Accept: "text/event-stream" }),
      cache: "no-store",
      credentials: "omit",
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new Unreachable(`the server cannot be reached (${err.message})`);
  }
  if (!response.ok) await answer(response);
  return response;
}
