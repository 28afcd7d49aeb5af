// How a Kafka client of the server authenticates to its broker (librdkafka's settings, the
// API's ``security`` object): the same fields for a topic bound to a stream and for a
// sink writing to one. The password is sent to the server only: no answer holds it.

import { filled } from "../forms.js";

export const SECURITY_FIELDS = [
  {
    name: "protocol",
    label: "Security protocol",
    type: "select",
    options: ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
  },
  {
    name: "sasl_mechanism",
    label: "SASL mechanism",
    type: "select",
    options: [["", "none"], "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
  },
  { name: "username", label: "SASL user" },
  { name: "password", label: "SASL password", type: "password", autocomplete: "new-password" },
  { name: "ca_location", label: "CA file (PEM)" },
];

/** The API's ``security`` object from the form's fields (empty ones left out). */
export const security = (data) => filled(data, SECURITY_FIELDS.map((f) => f.name));

/** What the API shows back of it (never a password): "SASL_SSL, PLAIN, user ed, CA …". */
export function securityText(s = {}) {
  const parts = [
    s.protocol,
    s.sasl_mechanism,
    s.username ? `user ${s.username}` : null,
    s.ca_location ? `CA ${s.ca_location}` : null,
  ];
  return parts.filter(Boolean).join(", ");
}
