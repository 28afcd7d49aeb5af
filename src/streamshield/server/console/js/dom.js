// Building the page from data: every value becomes a text node or an attribute value,
// never markup. The console's CSP (Trusted Types with no policy) makes every HTML sink throw,
// so this is the only way anything reaches the page.

/** An element with attributes (on* keys add listeners) and children (nodes or text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  add(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as text. */
export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces an element's content. */
export function show(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** An ISO-8601 time in the user's own time zone (the API speaks UTC). */
export function localTime(iso) {
  if (!iso) return "";
  const when = new Date(iso);
  return Number.isNaN(when.getTime()) ? String(iso) : when.toLocaleString();
}

/** A table from column names and rows of cells (nodes or text); an empty state if none. */
export function table(columns, rows, empty, attrs = {}) {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))),
  );
}

/** The message of an API error, with its field problems, as an alert element. */
export function errorBox(err, id) {
  const problems = (err && err.problems) || [];
  return h(
    "div",
    { class: "error", role: "alert", id },
    h("strong", {}, err && err.code ? `${err.code}: ` : "Error: "),
    err && err.message ? err.message : String(err),
    problems.length
      ? h("ul", {}, problems.map((p) => h("li", {}, `${p.field}: ${p.problem}`)))
      : null,
  );
}

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element (attributes only, no listeners) with children; built like {@link h}. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null && value !== false) el.setAttribute(key, String(value));
  }
  return add(el, children);
}

/**
 * Runs ``work`` with ``button`` showing that it is pending: disabled (no second submit
 * while the first is on its way; an aggregate's registration may take seconds), marked
 * aria-busy and labelled ``label`` until it settles, then restored if still shown.
 */
export async function pending(button, label, work) {
  const text = button.textContent;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  button.textContent = label;
  try {
    return await work();
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
    button.textContent = text;
  }
}
