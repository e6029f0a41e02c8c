// The console's page: sources and queries refreshed live, their topology, a query's steps on
// click, and a statement editor whose push queries stream their rows until stopped.

import { KsqlError, closeQuery, ksql, lag, streamQuery } from "./api.js";
import { drawSteps, drawTopology, parseSteps } from "./topology.js";

const REFRESH_MS = 2000;
const MAX_ROWS = 1000; // rows of a push query kept on the page (the oldest go first)
const $ = (id) => document.getElementById(id);
const state = { selected: null, sources: [], queries: [], figures: new Map(), push: null, refreshing: false,
  drawn: {} };

// ------------------------------------------------------------------ small DOM helpers

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text ?? "";
  if (className) td.className = className;
  return td;
}

function table(headings, rows, className = "") {
  const result = document.createElement("table");
  result.className = className;
  const head = result.createTHead().insertRow();
  for (const heading of headings) {
    const th = document.createElement("th");
    th.textContent = heading;
    head.appendChild(th);
  }
  const body = result.createTBody();
  for (const values of rows) {
    const row = body.insertRow();
    for (const value of values) cell(row, typeof value === "object" && value !== null ? JSON.stringify(value) : value);
  }
  return result;
}

function rate(value) {
  return value === undefined ? "–" : value.toFixed(value < 10 ? 2 : 0);
}

// ksqlDB's error code and message; code 0: no answer came, so there is no code to show.
function describe(error) {
  return error.code ? `error ${error.code} ${error.message}` : error.message;
}

function errorBox(error) {
  const box = document.createElement("div");
  box.className = "error";
  box.dataset.errorCode = error.code;
  const code = document.createElement("strong");
  code.textContent = error.code ? `Error ${error.code}` : "Error:";
  box.append(code, ` ${error.message}`);
  return box;
}

function failureOf(error) {
  return error instanceof KsqlError ? error : new KsqlError(0, String(error.message ?? error));
}

// ------------------------------------------------------------------ live lists and topology

async function refresh() {
  if (state.refreshing) return; // a slow answer: the next tick asks again
  state.refreshing = true;
  const status = $("refresh-status");
  try {
    const [entities, figures] = await Promise.all([ksql("SHOW STREAMS; SHOW TABLES; SHOW QUERIES EXTENDED;"), lag()]);
    const [streams, tables, queries] = entities;
    state.sources = [...streams.streams, ...tables.tables];
    state.queries = queries.queryDescriptions;
    state.figures = figures;
    drawSources();
    drawQueries();
    drawGraph();
    status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    status.className = "";
  } catch (error) {
    const failure = failureOf(error);
    status.textContent = `Refresh failed: ${describe(failure)}`;
    status.className = "failed";
  } finally {
    state.refreshing = false;
  }
}

// Redrawn only when what it shows changed, so that a click or a selection on the page is not
// lost to a refresh that brought nothing new.
function changed(name, shown) {
  const key = JSON.stringify(shown);
  if (state.drawn[name] === key) return false;
  state.drawn[name] = key;
  return true;
}

function drawGraph() {
  const shown = [state.sources.map((s) => [s.name, s.type]),
    state.queries.map((q) => [q.id, q.state, q.queryType, q.sources, q.sinks]), state.selected];
  if (!changed("graph", shown)) return;
  drawTopology($("topology"), state.sources, state.queries, { selected: state.selected, onQuery: showSteps });
}

function drawSources() {
  const readers = new Map();
  const writers = new Map();
  for (const query of state.queries) {
    for (const name of query.sources ?? []) readers.set(name, [...(readers.get(name) ?? []), query.id]);
    for (const name of query.sinks ?? []) writers.set(name, [...(writers.get(name) ?? []), query.id]);
  }
  const rows = state.sources
    .slice()
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((s) => [s.name, s.type, s.topic, `${s.keyFormat} / ${s.valueFormat}`,
      (writers.get(s.name) ?? []).join(", "), (readers.get(s.name) ?? []).join(", ")]);
  if (!changed("sources", rows)) return;
  const result = table(["Name", "Type", "Topic", "Key / value format", "Written by", "Read by"], rows);
  for (const row of result.tBodies[0].rows) for (const index of [0, 2, 4, 5]) row.cells[index].classList.add("ids");
  $("sources").replaceChildren(result);
}

function drawQueries() {
  const shown = [state.selected, state.queries.map((q) => [q.id, q.queryType, q.state, state.figures.get(q.id)])];
  if (!changed("queries", shown)) return;
  const result = table(["Query", "Type", "State", "Lag", "In/s", "Out/s", "Consumed", "Produced"], []);
  const body = result.tBodies[0];
  for (const query of state.queries) {
    const figures = state.figures.get(query.id);
    const row = body.insertRow();
    row.dataset.queryId = query.id;
    row.className = `query-row state-${(query.state ?? "unknown").toLowerCase()}`;
    if (query.id === state.selected) row.classList.add("selected");
    cell(row, query.id, "query-id ids");
    cell(row, query.queryType);
    cell(row, query.state ?? "–", "query-state");
    cell(row, figures ? String(figures.totalLag) : "–", "query-lag");
    cell(row, rate(figures?.consumedPerSecond));
    cell(row, rate(figures?.producedPerSecond));
    cell(row, figures ? String(figures.recordsConsumed) : "–", "query-consumed");
    cell(row, figures ? String(figures.recordsProduced) : "–", "query-produced");
    row.addEventListener("click", () => showSteps(query.id));
  }
  $("queries").replaceChildren(result);
}

async function showSteps(queryId) {
  state.selected = queryId;
  drawQueries();
  drawGraph();
  const panel = $("steps");
  panel.hidden = false;
  const heading = document.createElement("h3");
  heading.textContent = queryId;
  panel.replaceChildren(heading);
  try {
    const [explained] = await ksql(`EXPLAIN ${queryId};`);
    const description = explained.queryDescription;
    const statement = document.createElement("pre");
    statement.className = "statement";
    statement.textContent = description.statementText;
    panel.append(statement);
    drawSteps(panel, parseSteps(description.executionPlan));
  } catch (error) {
    panel.append(errorBox(failureOf(error)));
  }
}

// ------------------------------------------------------------------ the statement editor

function properties() {
  return { "auto.offset.reset": $("offset-reset").value };
}

// A statement whose first word is SELECT or PRINT goes to /query-stream; others to /ksql.
function isQuery(text) {
  const bare = text.replace(/^(\s|--[^\n]*\n|\/\*[\s\S]*?\*\/)*/, "");
  return /^(SELECT|PRINT)\b/i.test(bare);
}

function showEntity(entity) {
  const box = document.createElement("div");
  box.className = "entity";
  box.dataset.type = entity["@type"];
  if (entity.commandStatus) {
    box.textContent = `${entity.commandStatus.status}: ${entity.commandStatus.message}`;
  } else {
    const list = Object.entries(entity).find(([key, value]) => key !== "warnings" && Array.isArray(value));
    if (list && list[1].length && typeof list[1][0] === "object") {
      const headings = Object.keys(list[1][0]);
      box.append(table(headings, list[1].map((item) => headings.map((h) => item[h]))));
    } else {
      const pre = document.createElement("pre");
      const { "@type": _type, statementText: _text, warnings: _warnings, ...rest } = entity;
      pre.textContent = JSON.stringify(rest, null, 2);
      box.append(pre);
    }
  }
  for (const warning of entity.warnings ?? []) {
    const note = document.createElement("div");
    note.className = "warning";
    note.textContent = warning.message;
    box.append(note);
  }
  return box;
}

async function runStatements(text, output) {
  try {
    const entities = await ksql(text, properties());
    output.append(...entities.map(showEntity));
    if (!entities.length) output.append(Object.assign(document.createElement("div"), { className: "done", textContent: "Done." }));
  } catch (error) {
    const failure = failureOf(error);
    output.append(...failure.entities.map(showEntity), errorBox(failure));
  }
  refresh();
}

async function runQuery(text, output) {
  const controller = new AbortController();
  const push = { controller, queryId: null, rows: 0, stopped: false };
  state.push = push;
  $("stop").disabled = false;
  const status = Object.assign(document.createElement("div"), { className: "query-status", textContent: "Starting…" });
  const rows = table([], [], "rows");
  const lines = Object.assign(document.createElement("pre"), { className: "lines" });
  output.append(status, rows);
  try {
    await streamQuery(text, properties(), {
      signal: controller.signal,
      onHeader(header) {
        push.queryId = header.queryId ?? null;
        const head = rows.tHead.rows[0];
        for (const [index, name] of (header.columnNames ?? []).entries()) {
          const th = document.createElement("th");
          th.textContent = name;
          th.title = header.columnTypes?.[index] ?? "";
          head.appendChild(th);
        }
        status.textContent = `Query ${push.queryId ?? ""} running: 0 rows`;
        status.dataset.queryId = push.queryId ?? "";
        refresh();
      },
      onRow(values) {
        const row = rows.tBodies[0].insertRow();
        for (const value of values) cell(row, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value));
        if (rows.tBodies[0].rows.length > MAX_ROWS) rows.tBodies[0].deleteRow(0);
        push.rows += 1;
        status.textContent = `Query ${push.queryId ?? ""} running: ${push.rows} rows`;
      },
      onLine(line) {
        if (!lines.isConnected) output.append(lines);
        lines.textContent += `${line}\n`;
        push.rows += 1;
        status.textContent = `PRINT running: ${push.rows} lines`;
      },
    });
    status.textContent = `Query ${push.queryId ?? ""} ${push.stopped ? "stopped" : "ended"}: ${push.rows} rows`;
  } catch (error) {
    if (error.name === "AbortError" || push.stopped) {
      status.textContent = `Query ${push.queryId ?? ""} stopped: ${push.rows} rows`;
    } else {
      status.textContent = `Query ${push.queryId ?? ""} failed after ${push.rows} rows`;
      output.append(errorBox(failureOf(error)));
    }
  } finally {
    status.classList.add("finished");
    if (state.push === push) {
      state.push = null;
      $("stop").disabled = true;
    }
    refresh();
  }
}

async function stop() {
  const push = state.push;
  if (!push) return;
  push.stopped = true;
  $("stop").disabled = true;
  try {
    if (push.queryId) await closeQuery(push.queryId);
  } catch {
    // the query ended meanwhile: aborting below closes the stream all the same
  }
  setTimeout(() => push.controller.abort(), 1000); // if the stream has not ended by itself
}

// Statements answer in the response panel; a query streams into the query panel, where it
// stays while other statements run (an INSERT VALUES shows its rows arriving) until it is
// stopped or another query replaces it.
async function run() {
  const text = $("statement").value.trim();
  if (!text) return;
  const query = isQuery(text);
  if (query && state.push) await stop();
  const output = $(query ? "stream" : "response");
  output.replaceChildren(Object.assign(document.createElement("pre"), { className: "echo", textContent: text }));
  await (query ? runQuery(text, output) : runStatements(text, output));
}

$("run").addEventListener("click", run);
$("stop").addEventListener("click", stop);
$("statement").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    run();
  }
});
refresh();
setInterval(() => {
  if (!document.hidden) refresh();
}, REFRESH_MS);
