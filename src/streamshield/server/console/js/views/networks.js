// Shared operator networks and their privacy switches (GET /networks), one graph per
// network (a stream's selections, its windowed queries, or a join of two streams) and security level (a query runs at its session's Chinese-Wall level; a
// network's queries may run at several): the input stream, the switches PrS placed
// (initial, in-network, terminal) and the queries at that level they govern, each switch
// on or off with its counter and since when. A switch shared by queries of several
// levels appears in each level's graph. The
// graph is SVG built through DOM APIs (no markup parsing; the CSP allows it), with the same
// facts in a table for keyboards, screen readers and narrow screens. Administrators see
// every network and who receives; others only their own queries' switches, as the API
// answers.

import * as api from "../api.js";
import { h, localTime, show, svg, table } from "../dom.js";
import { loaded } from "../forms.js";

const COLUMNS = ["initial", "in-network", "terminal"];
const COL = 190; // px between columns
const ROW = 86; // px between nodes of a column
const BOX = { w: 150, h: 62 };

export async function networksView(ctx) {
  const answer = await loaded(ctx, "Shared networks", "networks", () => api.call("GET", "/networks"));
  if (!answer) return;
  const refresh = h("button", { type: "button", id: "networks-refresh", onclick: () => networksView(ctx) }, "Refresh");
  show(
    ctx.view,
    h("h1", {}, "Shared networks"),
    h(
      "p",
      { class: "muted" },
      "A switch is on while someone may receive a query behind it; a branch whose switches are off runs no Spark job. ",
      ctx.me.administrator ? "You see every network and who receives." : "You see the switches of your own queries.",
    ),
    h("div", { class: "actions" }, refresh),
    answer.networks.length
      ? answer.networks.map(network)
      : h("p", { class: "empty", id: "no-networks" }, "No shared network runs a query of yours."),
  );
}

function network(net) {
  const rows = net.switches.map((s) => [
    s.kind,
    s.queries.join(", ") + (s.other_queries ? ` (+${s.other_queries} other)` : ""),
    h("span", { class: `switch-state ${s.open ? "on" : "off"}` }, s.open ? "on" : "off"),
    String(s.kind === "terminal" ? s.receivers : s.counter),
    s.users ? s.users.join(", ") || "—" : "",
    localTime(s.since),
  ]);
  return h(
    "section",
    { class: "card", "data-network": net.stream, "data-kind": net.kind || "selections" },
    h(
      "h2",
      {},
      net.kind === "joins" ? "Streams " : "Stream ",
      h("code", {}, net.stream),
      net.kind === "windows" ? ": windowed queries" : net.kind === "joins" ? ": a shared join" : "",
    ),
    byLevel(net).map(([level, part]) =>
      h(
        "figure",
        { class: "level", "data-level": level ?? "" },
        h("figcaption", {}, level === null ? "No security level (levels are off)" : `Level ${level}`),
        graph(part),
      ),
    ),
    table(["Switch", "Queries", "State", "Counter", "Receivers", "Since"], rows, "No switch.", {
      class: "switches",
      "data-stream": net.stream,
    }),
  );
}

/** The network split by its queries' levels: per level, its queries and the switches
 * governing any of them (null: levels are off). */
function byLevel(net) {
  const levels = net.levels || {};
  const levelOf = (q) => (q in levels ? levels[q] : null);
  const distinct = [...new Set(net.queries.map(levelOf))];
  return distinct.map((level) => {
    const queries = net.queries.filter((q) => levelOf(q) === level);
    const switches = net.switches.filter((s) => s.queries.some((q) => queries.includes(q)));
    return [level, { ...net, queries, switches }];
  });
}

/** Columns: the stream, the switches by kind, the queries; edges where queries meet. */
function graph(net) {
  const columns = [[{ label: net.stream, kind: "stream", queries: net.queries }]];
  for (const kind of COLUMNS) {
    const here = net.switches.filter((s) => s.kind === kind);
    if (here.length) columns.push(here);
  }
  columns.push(net.queries.map((q) => ({ label: q, kind: "query", queries: [q] })));
  const height = Math.max(...columns.map((c) => c.length)) * ROW + 20;
  const width = (columns.length - 1) * COL + BOX.w + 20;
  const place = new Map();
  columns.forEach((column, x) => {
    const top = (height - column.length * ROW) / 2;
    column.forEach((node, y) => place.set(node, { x: 10 + x * COL, y: top + y * ROW + 10 }));
  });
  const edges = [];
  for (let x = 1; x < columns.length; x += 1) {
    for (const to of columns[x]) {
      for (const from of columns[x - 1]) {
        if (!from.queries.some((q) => to.queries.includes(q))) continue;
        const a = place.get(from);
        const b = place.get(to);
        edges.push(
          svg("line", {
            class: "edge",
            x1: a.x + BOX.w,
            y1: a.y + BOX.h / 2,
            x2: b.x,
            y2: b.y + BOX.h / 2,
          }),
        );
      }
    }
  }
  const nodes = columns.flat().map((node) => {
    const at = place.get(node);
    const isSwitch = node.id !== undefined;
    const lines = isSwitch
      ? [
          `${node.kind} ${node.open ? "ON" : "off"}`,
          node.kind === "terminal" ? `receivers ${node.receivers}` : `counter ${node.counter}`,
          `since ${new Date(node.since).toLocaleTimeString()}`,
        ]
      : [node.kind, node.label];
    const cls = isSwitch ? `node switch ${node.open ? "on" : "off"}` : `node ${node.kind}`;
    return svg(
      "g",
      {
        class: cls,
        transform: `translate(${at.x},${at.y})`,
        "data-switch": isSwitch ? node.id : null,
        "data-open": isSwitch ? String(node.open) : null,
      },
      svg("title", {}, isSwitch ? `${node.id}: ${node.queries.join(", ")}` : node.label),
      svg("rect", { width: BOX.w, height: BOX.h, rx: 6 }),
      lines.map((text, i) => svg("text", { x: 8, y: 18 + i * 17 }, text)),
    );
  });
  return svg(
    "svg",
    {
      class: "network",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": `Network of stream ${net.stream}: ${net.switches.length} switches`,
      "data-queries": net.queries.join(","),
    },
    edges,
    nodes,
  );
}
