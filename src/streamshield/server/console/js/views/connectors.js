// Connectors (administrators): the Kafka topics and MQTT topic filters bound to input
// streams (GET /connectors/kafka, /connectors/mqtt), each with its channels (a partition
// or a device, the user and provider its messages act as), its status and each
// channel's counts as the API gives them; a form per kind to bind one, and a two-step
// unbind. Others are not offered the page; one who opens it anyway sees the API's 403
// (CHANGE SYSTEM), and no form. A broker password is sent once and never shown back:
// the API never answers it and the form is emptied once the binding is made. The lists
// are read again every 3 s while the page is shown: a source's broker state changes on
// its own (it reconnects with a back-off), and so do its counts.

import * as api from "../api.js";
import { errorBox, h, show, table } from "../dom.js";
import { actionForm, confirmedButton, filled, loaded } from "../forms.js";
import { everyFewSeconds, keyedList } from "../live.js";
import { SECURITY_FIELDS, security, securityText } from "./kafka_security.js";

const KINDS = {
  kafka: {
    title: "Kafka topics",
    channel: "Partition",
    channels: "partitions",
    states: "partitions_state",
    key: "partition",
    counts: [
      ["Next offset", "next_offset"],
      ["Lag", "lag"],
      ["Landed", "landed"],
      ["Refused", "refused"],
    ],
  },
  mqtt: {
    title: "MQTT topic filters",
    channel: "Device",
    channels: "providers",
    states: "devices_state",
    key: "device",
    counts: [
      ["Waiting", "waiting"],
      ["Landed", "landed"],
      ["Refused", "refused"],
      ["Duplicates dropped", "duplicates"],
    ],
  },
};

/** A line of the channels or renames fields the console cannot turn into the API's map
 * (the API decides everything else). */
class EntryError extends Error {
  constructor(field, line, form) {
    super(`${JSON.stringify(line)} is not ${form}`);
    this.code = "invalid_entry";
    this.problems = [{ field, problem: `one ${form} a line` }];
  }
}

const lines = (text) =>
  String(text || "")
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);

/** ``KEY=USER`` or ``KEY=USER:PROVIDER`` lines (the CLI's --partition, --device). */
function channelMap(text, field, what) {
  const map = Object.create(null); // a key like __proto__ is a key like any other
  for (const line of lines(text)) {
    const at = line.indexOf("=");
    const who = line.slice(at + 1);
    if (at <= 0 || !who) {
      throw new EntryError(field, line, `${what}=USER or ${what}=USER:PROVIDER`);
    }
    const colon = who.indexOf(":");
    map[line.slice(0, at)] =
      colon < 0 ? { user: who } : { user: who.slice(0, colon), provider: who.slice(colon + 1) };
  }
  return map;
}

/** ``MESSAGE_FIELD=ATTRIBUTE`` lines (the CLI's --field). */
function renames(text) {
  const map = Object.create(null); // a key like __proto__ is a key like any other
  for (const line of lines(text)) {
    const at = line.indexOf("=");
    if (at <= 0 || at === line.length - 1) {
      throw new EntryError("fields", line, "FIELD=ATTRIBUTE");
    }
    map[line.slice(0, at)] = line.slice(at + 1);
  }
  return map;
}

/** A number field as a number when it is one (else as typed: the API says why not). */
const number = (text) => (text !== "" && Number.isFinite(Number(text)) ? Number(text) : text);

/** What a source's status means for its messages: connected, or retrying and why. */
function health(status) {
  if (status === "ok") return ["ok", "connected"];
  if (status === "starting") return ["pending", "connecting"];
  if (status.startsWith("held_back: ")) {
    return ["held", `connected, held back (${status.slice("held_back: ".length)})`];
  }
  if (status === "stopped") return ["bad", "stopped"];
  if (status === "state_unreadable") return ["bad", "stopped: its state file cannot be read"];
  return ["bad", `retrying: ${status}`];
}

export async function connectorsView(ctx) {
  const answer = await loaded(ctx, "Connectors", "connectors", () =>
    Promise.all([
      api.call("GET", "/connectors/kafka"),
      api.call("GET", "/connectors/mqtt"),
      api.call("GET", "/catalog"),
    ]),
  );
  if (!answer) return;
  const [, , catalog] = answer;
  const kinds = Object.keys(KINDS);
  const notice = h("div", { id: "connectors-notice", "aria-live": "polite" });
  const problem = h("div", { id: "connectors-problem", "aria-live": "polite" });
  const readProblem = h("div", { "aria-live": "polite" });
  const said = (text) => show(notice, h("p", { class: "notice" }, text));
  const lists = Object.fromEntries(
    kinds.map((kind) => [kind, bindingList(ctx, kind, problem, said, () => read())]),
  );
  const showAll = (answers) => kinds.forEach((kind, i) => lists[kind].show(answers[i].bindings));
  const read = everyFewSeconds(ctx, async (newest) => {
    let got;
    try {
      got = await Promise.all(kinds.map((kind) => api.call("GET", `/connectors/${kind}`)));
    } catch (err) {
      if (newest() && !ctx.fail(err)) show(readProblem, errorBox(err, "connectors-error"));
      return;
    }
    if (!newest()) return;
    show(readProblem);
    showAll(got);
  });
  showAll(answer);
  const streams = catalog.streams.filter((s) => s.kind === "input").map((s) => s.name);
  show(
    ctx.view,
    h("h1", {}, "Connectors"),
    h(
      "p",
      { class: "muted" },
      "Brokers bound to input streams: each partition or device lands as one channel, ",
      "acting as its user (who needs WRITE, for sps INJECT SP, on the stream at every landing).",
    ),
    notice,
    readProblem,
    problem,
    kinds.map((kind) =>
      h(
        "section",
        { class: "card", id: `${kind}-bindings` },
        h("h2", {}, KINDS[kind].title),
        lists[kind].node,
      ),
    ),
    h("datalist", { id: "input-streams" }, streams.map((s) => h("option", { value: s }))),
    kafkaForm(ctx, said, read),
    mqttForm(ctx, said, read),
  );
}

function bindingList(ctx, kind, problem, said, read) {
  const body = h("div", {});
  const what = kind === "kafka" ? "Kafka topic" : "MQTT topic filter";
  const empty = h("p", { class: "empty" }, `No ${what} is bound.`);
  const list = keyedList({ frame: body, body, empty }, (binding) =>
    drawn(ctx, kind, binding, problem, said, read),
  );
  return { node: list.node, show: (bindings) => list.show(bindings.map((b) => [b.name, b])) };
}

/** One binding's card: what it reads, as whom, its status and each channel's counts. */
function drawn(ctx, kind, binding, problem, said, read) {
  const facts = h("dl", { class: "facts" });
  const channels = h("div", {});
  const unbind = confirmedButton(ctx, {
    ask: "Unbind…",
    confirm: "Yes, unbind it",
    busy: "Unbinding…",
    attrs: { "data-unbind": `${kind}/${binding.name}` },
    confirmAttrs: { "data-unbind-confirm": `${kind}/${binding.name}` },
    problem,
    run: async () => {
      await api.call("DELETE", `/connectors/${kind}/${encodeURIComponent(binding.name)}`);
      await read();
      said(`${binding.name} unbound; what it landed stays.`);
    },
  });
  const head = h("h3", {});
  const node = h(
    "section",
    { class: "binding", "data-binding": binding.name, "data-kind": kind },
    head,
    facts,
    channels,
    h("div", { class: "actions" }, unbind),
  );
  const update = (b) => {
    show(head, h("code", {}, b.name), " → stream ", h("code", {}, b.stream));
    const [cls, label] = health(b.status);
    const status = h("span", { class: `connector-status ${cls}`, "data-status": b.status }, label);
    const shown = kind === "kafka" ? kafkaFacts(b) : mqttFacts(b);
    show(facts, [...shown, ["Status", status]].map(fact));
    show(channels, channelTable(kind, b));
  };
  return { node, update };
}

const fact = ([name, value]) => [h("dt", {}, name), h("dd", {}, value)];
const renamed = (fields) =>
  Object.entries(fields || {})
    .map(([from, to]) => `${from} → ${to}`)
    .join(", ");
function format(b) {
  if (b.format !== "values") return b.format;
  const names = renamed(b.fields);
  return names ? `values (${names})` : "values";
}

function kafkaFacts(b) {
  return [
    ["Brokers", b.bootstrap_servers],
    ["Topic", h("code", { class: "source" }, b.topic)],
    ["Consumer group", b.group_id],
    ["Format", format(b)],
    ["Security", securityText(b.security)],
    ["Records per landing", String(b.max_records)],
  ];
}

function mqttFacts(b) {
  const auth = [b.ca_file ? `TLS, CA ${b.ca_file}` : "no TLS", b.username ? `user ${b.username}` : null];
  return [
    ["Broker", `${b.host}:${b.port}`],
    ["Topic filter", h("code", { class: "source" }, b.topic_filter)],
    ["Device level", String(b.provider_level)],
    ["Client id", b.client_id],
    ["Format", format(b)],
    ["Security", auth.filter(Boolean).join(", ")],
    ["Messages of no bound device", String(b.unbound)],
    ["Retained copies skipped", String(b.retained)],
  ];
}

/** Each channel: who it acts as (from the binding) and its state (from the source). */
function channelTable(kind, b) {
  const k = KINDS[kind];
  const states = new Map((b[k.states] || []).map((s) => [String(s[k.key]), s]));
  const rows = Object.entries(b[k.channels] || {}).map(([name, who]) => {
    const state = states.get(name) || {};
    return [
      name,
      who.user,
      who.provider || who.user,
      ...k.counts.map(([, key]) => (state[key] ?? "—").toString()),
      state.held || "—",
    ];
  });
  return table(
    [k.channel, "User", "Provider", ...k.counts.map(([label]) => label), "Held back"],
    rows,
    "No channel.",
    { class: "channels", "data-channels": `${kind}/${b.name}` },
  );
}

const SECRET = "The password goes to the server only: it is never shown again.";
const FORMAT = { name: "format", label: "Format", type: "select", options: ["element", "values"] };
const FIELDS = {
  name: "fields",
  label: "Renames (values)",
  type: "textarea",
  placeholder: "px=price",
};

/** A bind form of one kind: its name and stream, ``fields`` (what the kind reads and
 * how), format and renames, then ``more``; ``body`` makes the rest of the request. */
function bindForm(ctx, kind, { title, note, fields, more, body, done }, said, read) {
  return actionForm(ctx, {
    id: `${kind}-bind`,
    title,
    note: `${note} Renames: FIELD=ATTRIBUTE a line. ${SECRET}`,
    submit: "Bind",
    clear: true,
    fields: [
      { name: "name", label: "Binding name", required: true },
      { name: "stream", label: "Input stream", required: true, list: "input-streams" },
      ...fields,
      FORMAT,
      FIELDS,
      ...more,
    ],
    send: async (data) => {
      const request = {
        ...filled(data, ["name", "stream", "format"]),
        fields: renames(data.fields),
        ...body(data),
      };
      const made = await api.call("POST", `/connectors/${kind}`, request);
      await read();
      said(`${done(made)} bound to ${made.stream} as ${made.name}.`);
    },
  });
}

function kafkaForm(ctx, said, read) {
  const form = {
    title: "Bind a Kafka topic",
    note: "One partition a line, N=USER or N=USER:PROVIDER; partitions not named are not read.",
    fields: [
      { name: "bootstrap_servers", label: "Brokers", required: true, placeholder: "broker1:9092" },
      { name: "topic", label: "Topic", required: true },
      {
        name: "partitions",
        label: "Partitions",
        type: "textarea",
        required: true,
        placeholder: "0=ed:ed.k0",
      },
    ],
    more: [
      { name: "group_id", label: "Consumer group", placeholder: "streamshield-NAME" },
      { name: "max_records", label: "Records per landing", type: "number", min: 1, value: 5000 },
      ...SECURITY_FIELDS,
    ],
    body: (data) => ({
      ...filled(data, ["bootstrap_servers", "topic", "group_id"]),
      partitions: channelMap(data.partitions, "partitions", "N"),
      security: security(data),
      ...(data.max_records === "" ? {} : { max_records: number(data.max_records) }),
    }),
    done: (made) => `Topic ${made.topic}`,
  };
  return bindForm(ctx, "kafka", form, said, read);
}

function mqttForm(ctx, said, read) {
  const form = {
    title: "Bind an MQTT topic filter",
    note:
      "One device a line, DEVICE=USER or DEVICE=USER:PROVIDER; devices not named are refused. " +
      "A CA file turns TLS on.",
    fields: [
      { name: "host", label: "Broker host", required: true },
      { name: "port", label: "Port", type: "number", min: 1, value: 1883 },
      { name: "topic_filter", label: "Topic filter", required: true, placeholder: "plant/+/reading" },
      { name: "provider_level", label: "Device level (from 0)", type: "number", min: 0, required: true },
      {
        name: "providers",
        label: "Devices",
        type: "textarea",
        required: true,
        placeholder: "m1=ed:ed.m1",
      },
    ],
    more: [
      { name: "client_id", label: "Client id", placeholder: "streamshield-NAME" },
      { name: "username", label: "Broker user" },
      { name: "password", label: "Broker password", type: "password", autocomplete: "new-password" },
      { name: "ca_file", label: "CA file (PEM)" },
    ],
    body: (data) => ({
      ...filled(data, ["host", "topic_filter", "client_id", "username", "password", "ca_file"]),
      providers: channelMap(data.providers, "providers", "DEVICE"),
      provider_level: number(data.provider_level),
      ...(data.port === "" ? {} : { port: number(data.port) }),
    }),
    done: (made) => `Topic filter ${made.topic_filter}`,
  };
  return bindForm(ctx, "mqtt", form, said, read);
}
