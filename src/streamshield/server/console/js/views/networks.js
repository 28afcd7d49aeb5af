// Shared operator networks and their privacy switches (GET /networks), one graph per
// network (a stream's selections, its windowed queries, or a join of two streams) and security level (a query runs at its session's Chinese-Wall level; a
// network's queries may run at several): the input stream, the switches PrS placed
// (initial, in-network, terminal) and the queries at that level they govern, each switch
// on or off with its counter and since when. A switch shared by queries of several
// levels appears in each level's graph. The
// graph is SVG built through DOM APIs (no markup parsing; the CSP allows it), with the same
// facts in a table for keyboards, screen readers and narrow screens. Administrators see
// every network and who receives; others only their own queries' switches, as the API
// answers. A switch that is off says why: nobody receives a query behind it (its
// queries still run and process rows, but no branch job hands them to anyone). Each
// column's nodes are ordered by the barycentre of their neighbours (a few sweeps, the
// order with the fewest crossings kept), so edges cross only where no order avoids it.

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

/** Why a switch is in its state, in a few words: "on", or off and why. */
function stateOf(s) {
  if (s.open) return "on";
  const count = s.kind === "terminal" ? s.receivers : s.counter;
  return count === 0 ? "off: no subscriber" : "off until the network's next batch";
}

function network(net) {
  const rows = net.switches.map((s) => [
    s.kind,
    s.queries.join(", ") +
      (s.other_queries
        ? ` (and ${s.other_queries} ${s.other_queries === 1 ? "query" : "queries"} of other users)`
        : ""),
    h("span", { class: `switch-state ${s.open ? "on" : "off"}` }, stateOf(s)),
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

/** Edges between two neighbouring columns: pairs of nodes governing a query in common. */
function linked(left, right) {
  const edges = [];
  left.forEach((from, i) =>
    right.forEach((to, j) => {
      if (from.queries.some((q) => to.queries.includes(q))) edges.push([i, j]);
    }),
  );
  return edges;
}

/** How many pairs of edges between two columns cross. */
function crossings(edges) {
  let count = 0;
  for (let a = 0; a < edges.length; a += 1) {
    for (let b = a + 1; b < edges.length; b += 1) {
      const [i, j] = edges[a];
      const [k, l] = edges[b];
      if ((i - k) * (j - l) < 0) count += 1;
    }
  }
  return count;
}

const totalCrossings = (columns) =>
  columns.slice(1).reduce((n, column, x) => n + crossings(linked(columns[x], column)), 0);

/** ``column`` ordered by the mean position of its neighbours in ``fixed`` (a node
 * without one keeps its place). */
function byBarycentre(column, fixed) {
  const centre = column.map((node, i) => {
    const at = fixed.flatMap((other, j) => (other.queries.some((q) => node.queries.includes(q)) ? [j] : []));
    return at.length ? at.reduce((a, b) => a + b, 0) / at.length : i;
  });
  return column
    .map((node, i) => [centre[i], i, node])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([, , node]) => node);
}

/** Columns reordered by barycentre sweeps, down and up, keeping the best order seen. */
function layered(columns) {
  let best = columns;
  let fewest = totalCrossings(columns);
  let current = columns.map((c) => [...c]);
  for (let sweep = 0; sweep < 4 && fewest > 0; sweep += 1) {
    for (let x = 1; x < current.length; x += 1) current[x] = byBarycentre(current[x], current[x - 1]);
    for (let x = current.length - 2; x >= 0; x -= 1) current[x] = byBarycentre(current[x], current[x + 1]);
    const count = totalCrossings(current);
    if (count < fewest) {
      fewest = count;
      best = current.map((c) => [...c]);
    }
  }
  return best;
}

/** Columns: the stream, the switches by kind, the queries; edges where queries meet. */
function graph(net) {
  const naive = [[{ label: net.stream, kind: "stream", queries: net.queries }]];
  for (const kind of COLUMNS) {
    const here = net.switches.filter((s) => s.kind === kind);
    if (here.length) naive.push(here);
  }
  naive.push(net.queries.map((q) => ({ label: q, kind: "query", queries: [q] })));
  const columns = layered(naive);
  const height = Math.max(...columns.map((c) => c.length)) * ROW + 20;
  const width = (columns.length - 1) * COL + BOX.w + 20;
  const place = new Map();
  columns.forEach((column, x) => {
    const top = (height - column.length * ROW) / 2;
    column.forEach((node, y) => place.set(node, { x: 10 + x * COL, y: top + y * ROW + 10 }));
  });
  const edges = [];
  for (let x = 1; x < columns.length; x += 1) {
    for (const [i, j] of linked(columns[x - 1], columns[x])) {
      const a = place.get(columns[x - 1][i]);
      const b = place.get(columns[x][j]);
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
  const nodes = columns.flat().map((node) => {
    const at = place.get(node);
    const isSwitch = node.id !== undefined;
    const count = node.kind === "terminal" ? `receivers ${node.receivers}` : `counter ${node.counter}`;
    const lines = isSwitch
      ? [
          `${node.kind} ${node.open ? "ON" : "off"}`,
          node.open ? count : stateOf(node) === "off: no subscriber" ? "no subscriber" : "opens next batch",
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
      svg("title", {}, isSwitch ? `${node.id}: ${node.queries.join(", ")}; ${count}` : node.label),
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
