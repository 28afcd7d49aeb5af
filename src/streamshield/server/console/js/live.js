// Lists a page reads again every few seconds while it is shown (a connector's broker
// state and a sink's counts change on their own). Each item is drawn once per key and
// updated in place when read again, so a redraw never takes away what the user is
// about to press (a revealed "Yes, unbind it") or her focus; only a list whose keys
// changed (a bind, an unbind) is laid out again.

import { h } from "./dom.js";

export const EVERY_MS = 3000;

/**
 * A list of keyed items: ``draw(item)`` makes one item's ``{ node, update(item) }``;
 * ``frame`` (e.g. a table) shows ``body``'s items, ``empty`` stands when there are none.
 * Returns the list's element and ``show(items)``, items as ``[key, item]`` pairs.
 */
export function keyedList({ frame, body, empty }, draw) {
  const host = h("div", {});
  let drawn = new Map();
  const show = (items) => {
    const next = new Map();
    for (const [key, item] of items) {
      const entry = drawn.get(key) || draw(item);
      entry.update(item);
      next.set(key, entry);
    }
    const before = [...drawn.keys()];
    const same = before.length === next.size && [...next.keys()].every((k, i) => before[i] === k);
    drawn = next;
    if (!same || !host.firstChild) {
      body.replaceChildren(...[...next.values()].map((entry) => entry.node));
      host.replaceChildren(next.size ? frame : empty);
    }
  };
  return { node: host, show };
}

/**
 * Runs ``read`` every few seconds until the page is left; ``read`` gets whether it is
 * still the newest reading when its answer comes (an older, slower answer never draws
 * over a newer one). Returns a function reading at once (after a change).
 */
export function everyFewSeconds(ctx, read) {
  let asked = 0;
  const now = () => {
    const mine = ++asked;
    return read(() => mine === asked && ctx.view.isConnected);
  };
  const timer = setInterval(now, EVERY_MS);
  ctx.onLeave(() => clearInterval(timer));
  return now;
}
