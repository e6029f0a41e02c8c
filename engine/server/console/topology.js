// The topology of sources and queries, drawn as SVG, and a query's steps read from EXPLAIN.

const SVG = "http://www.w3.org/2000/svg"; // the SVG namespace (a name, never fetched)
const NODE = { width: 156, height: 34 };
const GAP = { column: 48, row: 18, margin: 12 };

function element(name, attributes = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function shorten(text, length = 20) {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

/**
 * Nodes and edges of the graph: one node per source (STREAM or TABLE) and per query, an edge
 * from each source a query reads to the query and from the query to each source it writes.
 * `sources` are {name, type}; `queries` are ksqlDB's query descriptions (id, sources, sinks).
 */
export function graph(sources, queries) {
  const nodes = new Map();
  for (const source of sources) {
    nodes.set(`source:${source.name}`, { id: `source:${source.name}`, kind: source.type, name: source.name });
  }
  const edges = [];
  const sourceNode = (name) => {
    const id = `source:${name}`;
    if (!nodes.has(id)) nodes.set(id, { id, kind: "SOURCE", name }); // dropped since, or not listed yet
    return id;
  };
  for (const query of queries) {
    const id = `query:${query.id}`;
    nodes.set(id, { id, kind: "QUERY", name: query.id, state: query.state, queryType: query.queryType });
    for (const name of query.sources ?? []) edges.push({ from: sourceNode(name), to: id });
    for (const name of query.sinks ?? []) edges.push({ from: id, to: sourceNode(name) });
  }
  return { nodes: [...nodes.values()], edges };
}

/**
 * A column per node, each node right of every node it reads from (longest path from a node
 * nothing feeds); a cycle (INSERT INTO a source the query reads) is cut after one round per node.
 */
export function layout({ nodes, edges }) {
  const column = new Map(nodes.map((node) => [node.id, 0]));
  for (let round = 0; round < nodes.length; round += 1) {
    let moved = false;
    for (const { from, to } of edges) {
      if (column.get(to) < column.get(from) + 1 && column.get(from) + 1 < nodes.length) {
        column.set(to, column.get(from) + 1);
        moved = true;
      }
    }
    if (!moved) break;
  }
  const rows = new Map();
  const placed = new Map();
  const ordered = [...nodes].sort((a, b) => column.get(a.id) - column.get(b.id) || a.name.localeCompare(b.name));
  for (const node of ordered) {
    const x = column.get(node.id);
    const y = rows.get(x) ?? 0;
    rows.set(x, y + 1);
    placed.set(node.id, {
      ...node,
      x: GAP.margin + x * (NODE.width + GAP.column),
      y: GAP.margin + y * (NODE.height + GAP.row),
    });
  }
  const columns = Math.max(1, ...[...column.values()].map((c) => c + 1));
  const height = Math.max(1, ...rows.values());
  return {
    nodes: placed,
    edges,
    width: 2 * GAP.margin + columns * NODE.width + (columns - 1) * GAP.column,
    height: 2 * GAP.margin + height * NODE.height + (height - 1) * GAP.row,
  };
}

/** Draw the topology into `svg`; clicking a query calls `onQuery(queryId)`. */
export function drawTopology(svg, sources, queries, { selected, onQuery }) {
  const placed = layout(graph(sources, queries));
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${placed.width} ${placed.height}`);
  svg.setAttribute("width", placed.width);
  svg.setAttribute("height", placed.height);
  const marker = element("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7",
    orient: "auto-start-reverse",
  }, element("defs", {}, svg));
  element("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }, marker);
  for (const { from, to } of placed.edges) {
    const a = placed.nodes.get(from);
    const b = placed.nodes.get(to);
    const [x1, y1] = [a.x + NODE.width, a.y + NODE.height / 2];
    const [x2, y2] = [b.x, b.y + NODE.height / 2];
    const bend = Math.max(24, Math.abs(x2 - x1) / 2);
    element("path", {
      d: `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}`,
      class: "edge", "marker-end": "url(#arrow)", "data-from": a.name, "data-to": b.name,
    }, svg);
  }
  for (const node of placed.nodes.values()) {
    const classes = ["node", `node-${node.kind.toLowerCase()}`];
    if (node.kind === "QUERY") {
      classes.push(`state-${(node.state ?? "unknown").toLowerCase()}`);
      if (node.queryType === "PUSH") classes.push("push");
      if (node.name === selected) classes.push("selected");
    }
    const group = element("g", {
      class: classes.join(" "), transform: `translate(${node.x} ${node.y})`,
      "data-kind": node.kind, "data-name": node.name,
    }, svg);
    element("title", {}, group).textContent = node.kind === "QUERY"
      ? `${node.name} (${node.queryType ?? "PERSISTENT"}, ${node.state ?? "state unknown"})`
      : `${node.kind} ${node.name}`;
    const radius = node.kind === "QUERY" ? NODE.height / 2 : 4;
    element("rect", { width: NODE.width, height: NODE.height, rx: radius, ry: radius }, group);
    const label = element("text", { x: NODE.width / 2, y: NODE.height / 2 + 4, "text-anchor": "middle" }, group);
    label.textContent = shorten(node.name);
    if (node.kind === "QUERY") group.addEventListener("click", () => onQuery(node.name));
  }
}

/**
 * The steps of a query from EXPLAIN's executionPlan, the sink first: one line a step,
 * " > [ streamSelectV1 ] | ctx: Project", indented by a tab per level. Each step is
 * {type, name, version, ctx, inputs}: `type` the wire name, `name` and `version` its parts.
 */
export function parseSteps(executionPlan) {
  const roots = [];
  const open = []; // the last step seen at each depth
  for (const line of (executionPlan ?? "").split("\n")) {
    const match = /^(\t*) > \[ (\S+) \] \| ctx: (.*)$/.exec(line);
    if (!match) continue;
    const [, tabs, type, ctx] = match;
    const version = /^(.*?)V(\d+)$/.exec(type);
    const step = {
      type, ctx, inputs: [],
      name: version ? version[1] : type,
      version: version ? Number(version[2]) : null,
    };
    const depth = tabs.length;
    if (depth === 0 || !open[depth - 1]) roots.push(step);
    else open[depth - 1].inputs.push(step);
    open[depth] = step;
    open.length = depth + 1;
  }
  return roots;
}

/** A nested list of `steps` (from parseSteps) in `container`. */
export function drawSteps(container, steps) {
  const list = document.createElement("ul");
  list.className = "steps";
  for (const step of steps) {
    const item = document.createElement("li");
    item.className = "step";
    item.dataset.type = step.type;
    const name = document.createElement("span");
    name.className = "step-name";
    name.textContent = step.name;
    const version = document.createElement("span");
    version.className = "step-version";
    version.textContent = step.version === null ? "" : `V${step.version}`;
    const ctx = document.createElement("span");
    ctx.className = "step-ctx";
    ctx.textContent = step.ctx;
    item.append(name, version, ctx);
    if (step.inputs.length) drawSteps(item, step.inputs);
    list.appendChild(item);
  }
  container.appendChild(list);
}
