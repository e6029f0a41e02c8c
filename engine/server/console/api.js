// The server's REST API as the console uses it: statements on /ksql, figures on /lag, queries
// streamed from /query-stream and closed on /close-query. Every failure is a KsqlError holding
// ksqlDB's error code and message (the server's error body), never a stack trace.

const KSQL_JSON = "application/vnd.ksql.v1+json";
const DELIMITED = "application/vnd.ksqlapi.delimited.v1";

export class KsqlError extends Error {
  constructor(code, message, entities = []) {
    super(message);
    this.code = code;
    this.entities = entities; // what the statements before the failing one answered
  }
}

// URLs on the page's origin: a page opened as http://user:password@host/console has the
// credentials in its own URL, and fetch refuses URLs that hold credentials.
function url(path) {
  return new URL(path, window.location.origin).href;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not ksqlDB's error body: described by its status below
  }
  if (body && typeof body.message === "string") {
    return new KsqlError(body.error_code ?? response.status * 100, body.message, body.entities ?? []);
  }
  return new KsqlError(response.status * 100, `The server answered ${response.status} ${response.statusText}.`);
}

async function send(path, init) {
  let response;
  try {
    response = await fetch(url(path), init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new KsqlError(0, `The server did not answer (${error.message}).`);
  }
  if (!response.ok) throw await failure(response);
  return response;
}

/** The entities /ksql answers for `text` (one or more statements ended by ';'). */
export async function ksql(text, properties = {}) {
  const response = await send("/ksql", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: KSQL_JSON },
    body: JSON.stringify({ ksql: text, streamsProperties: properties }),
  });
  return response.json();
}

/** The figures of the persistent queries this server runs, by query id (GET /lag). */
export async function lag() {
  const response = await send("/lag", { headers: { Accept: "application/json" } });
  const report = await response.json();
  return new Map(report.queries.map((figures) => [figures.queryId, figures]));
}

/** Ask the server to close the push query `queryId` (its stream then ends). */
export async function closeQuery(queryId) {
  await send("/close-query", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ queryId }),
  });
}

/**
 * Run a query (push or pull) or a PRINT on /query-stream, calling `onHeader(metadata)` once,
 * `onRow(values)` for each row as it arrives and `onLine(text)` for each of PRINT's lines.
 * Resolves when the stream ends; rejects with a KsqlError (the server's error, before or
 * during the stream), or with an AbortError when `signal` aborts it.
 */
export async function streamQuery(sql, properties, { signal, onHeader, onRow, onLine }) {
  const response = await send("/query-stream", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: DELIMITED },
    body: JSON.stringify({ sql, properties }),
    signal,
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  let first = true;
  const handle = (line) => {
    if (!line.trim()) return;
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      onLine(line); // PRINT writes its records as text
      return;
    }
    if (Array.isArray(message)) {
      onRow(message);
    } else if (message && typeof message.message === "string" && "error_code" in message) {
      throw new KsqlError(message.error_code, message.message);
    } else if (first) {
      onHeader(message);
    } else {
      onLine(line);
    }
    first = false;
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    const lines = pending.split("\n");
    pending = lines.pop();
    lines.forEach(handle);
  }
  handle(pending);
}
