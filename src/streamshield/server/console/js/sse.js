// Server-sent events read from a fetch response. EventSource cannot send an
// Authorization header, and a token in the URL would end up in logs and history.

/** Yields {event, data} for each event of the body; comments (keep-alives) are skipped. */
export async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = "message";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (;;) {
      const newline = buffer.indexOf("\n");
      const ret = buffer.indexOf("\r");
      let cut;
      let width = 1;
      if (ret >= 0 && (newline < 0 || ret < newline)) {
        if (ret === buffer.length - 1) break; // a CR whose LF may be in the next chunk
        cut = ret;
        width = buffer[ret + 1] === "\n" ? 2 : 1;
      } else if (newline >= 0) {
        cut = newline;
      } else {
        break;
      }
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + width);
      if (line === "") {
        if (data.length) yield { event, data: data.join("\n") };
        event = "message";
        data = [];
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
      }
    }
  }
}
