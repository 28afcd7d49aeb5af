// Forms and buttons of the administration pages: each sends one API call with the
// session's token and shows the server's refusal beside itself (nothing is checked or
// enforced here: the API decides, and its message names the field).

import { errorBox, h, pending, show } from "./dom.js";

/** Comma- or space-separated names (roles, juniors) as a list, empty parts dropped. */
export function names(text) {
  return String(text || "")
    .split(/[,\s]+/)
    .filter(Boolean);
}

/** The named fields that are filled in, for a request body (an empty one is left to the
 * API's default). */
export function filled(data, fields) {
  return Object.fromEntries(fields.filter((n) => data[n] !== "").map((n) => [n, data[n]]));
}

function field(form, f) {
  const id = `${form}-${f.name}`;
  if (f.type === "checkbox") {
    return h(
      "label",
      { class: "check" },
      h("input", { id, name: f.name, type: "checkbox", checked: f.checked }),
      " ",
      f.label,
    );
  }
  let control;
  if (f.type === "select") {
    // An option is a value shown as itself, or [value, label] ("" for none chosen).
    const options = f.options.map((o) => (Array.isArray(o) ? o : [o, o]));
    control = h(
      "select",
      { id, name: f.name, required: f.required },
      options.map(([value, label]) => h("option", { value, selected: value === f.value }, label)),
    );
  } else if (f.type === "textarea") {
    control = h("textarea", {
      id,
      name: f.name,
      required: f.required,
      rows: f.rows || 2,
      placeholder: f.placeholder,
      spellcheck: "false",
    });
  } else {
    control = h("input", {
      id,
      name: f.name,
      type: f.type || "text",
      required: f.required,
      value: f.value,
      placeholder: f.placeholder,
      min: f.min,
      autocomplete: f.autocomplete || "off",
      spellcheck: "false",
      list: f.list,
    });
  }
  return h("div", {}, h("label", { for: id }, f.label), control);
}

/**
 * A form card: labelled fields, a submit button, and the server's refusal shown inline
 * (`#<id>-error`). ``send`` gets the fields as an object (checkboxes as booleans).
 * ``clear``: emptied once sent (a form holding a password keeps it no longer than it must).
 */
export function actionForm(ctx, { id, title, fields, submit, send, clear = false, note = null }) {
  const problem = h("div", { id: `${id}-problem`, "aria-live": "polite" });
  const button = h("button", { type: "submit" }, submit);
  const form = h(
    "form",
    { id, class: "card" },
    title ? h("h2", {}, title) : null,
    note ? h("p", { class: "muted" }, note) : null,
    h("div", { class: "filters" }, fields.map((f) => field(id, f))),
    problem,
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    for (const f of fields) if (f.type === "checkbox") data[f.name] = data[f.name] === "on";
    show(problem);
    try {
      await pending(button, `${submit}…`, () => send(data));
      if (clear) form.reset();
    } catch (err) {
      if (!ctx.fail(err)) show(problem, errorBox(err, `${id}-error`));
    }
  });
  return form;
}

/** A button running one API action, pending (labelled ``busy``) while it runs; a
 * refusal is shown in ``problem`` (`#<errorId>`). */
export function actionButton(ctx, label, attrs, problem, run, { busy, errorId = "admin-error" } = {}) {
  const button = h("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", async () => {
    show(problem);
    try {
      await pending(button, busy || `${label}…`, run);
    } catch (err) {
      if (!ctx.fail(err)) show(problem, errorBox(err, errorId));
    }
  });
  return button;
}

/** An action that cannot be undone, in two steps instead of confirm() (keyboard-friendly,
 * never a blocking dialog): ``ask`` reveals the ``confirm`` button, which runs ``run``. */
export function confirmedButton(ctx, options) {
  const { ask, confirm, busy, attrs = {}, confirmAttrs = {}, problem, errorId, run } = options;
  const yes = actionButton(ctx, confirm, { class: "danger", ...confirmAttrs }, problem, run, {
    busy,
    errorId,
  });
  yes.hidden = true;
  const first = h("button", { type: "button", ...attrs }, ask);
  first.addEventListener("click", () => {
    yes.hidden = false;
    yes.focus();
  });
  return h("span", {}, first, " ", yes);
}

/** A page's title and body once its data has loaded, or the API's refusal (`#<id>-error`). */
export async function loaded(ctx, title, id, fetchAll) {
  show(ctx.view, h("h1", {}, title), h("p", { class: "muted" }, "Loading…"));
  try {
    return await fetchAll();
  } catch (err) {
    if (!ctx.fail(err)) show(ctx.view, h("h1", {}, title), errorBox(err, `${id}-error`));
    return null;
  }
}
