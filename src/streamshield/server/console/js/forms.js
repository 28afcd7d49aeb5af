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
  const control =
    f.type === "select"
      ? h(
          "select",
          { id, name: f.name, required: f.required },
          f.options.map((o) => h("option", { value: o, selected: o === f.value }, o)),
        )
      : h("input", {
          id,
          name: f.name,
          type: f.type || "text",
          required: f.required,
          value: f.value,
          autocomplete: f.autocomplete || "off",
          spellcheck: "false",
          list: f.list,
        });
  return h("div", {}, h("label", { for: id }, f.label), control);
}

/**
 * A form card: labelled fields, a submit button, and the server's refusal shown inline
 * (`#<id>-error`). ``send`` gets the fields as an object (checkboxes as booleans).
 */
export function actionForm(ctx, { id, title, fields, submit, send }) {
  const problem = h("div", { id: `${id}-problem`, "aria-live": "polite" });
  const button = h("button", { type: "submit" }, submit);
  const form = h(
    "form",
    { id, class: "card" },
    title ? h("h2", {}, title) : null,
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
    } catch (err) {
      if (!ctx.fail(err)) show(problem, errorBox(err, `${id}-error`));
    }
  });
  return form;
}

/** A button running one API action, pending while it runs; a refusal is shown in
 * ``problem``. */
export function actionButton(ctx, label, attrs, problem, run) {
  const button = h("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", async () => {
    show(problem);
    try {
      await pending(button, `${label}…`, run);
    } catch (err) {
      if (!ctx.fail(err)) show(problem, errorBox(err, "admin-error"));
    }
  });
  return button;
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
