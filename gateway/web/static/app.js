// Eventloom's web view: the memory graph (D3 force layout), a session's timeline with an "as of" slider,
// the node panel with citations, and the peers. Read-only: every request is a GET to /v1 (see docs/ui.md).
"use strict";

const KIND_COLOURS = {
  entity: "#9aa5b1", observation: "#56b6c2", claim: "#f5a623", resolution: "#e06c75",
  decision: "#c678dd", task: "#61afef", goal: "#98c379", agent: "#d19a66", issue: "#ef596f",
  verification: "#7ee787", person: "#e5c07b", file: "#5c6370", workflow_run: "#2bbac5",
};
const FALLBACK = ["#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
const state = { session: "", search: "", asOf: null, graph: { nodes: [], edges: [] }, events: [], selected: null };
const positions = new Map(); // node id (and entity name) -> last position, so a redraw keeps the layout
let simulation = null;

const $ = (selector) => document.querySelector(selector);

function colour(kind) {
  if (KIND_COLOURS[kind]) return KIND_COLOURS[kind];
  let hash = 0;
  for (const ch of kind) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return FALLBACK[hash % FALLBACK.length];
}

async function api(path, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== null && v !== ""));
  const url = query.toString() ? `${path}?${query}` : path;
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (response.status === 401) {
    window.location.assign("/ui");
    throw new Error("logged out");
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function shortTime(ts) {
  // to the millisecond: events a moment apart stay apart
  return ts ? ts.replace("T", " ").replace(/(\.\d{3})\d*Z$/, "$1Z") : "";
}

function clip(text, length) {
  return text.length > length ? `${text.slice(0, length - 2)}...` : text;
}

function subtitle(node) {
  // what a node says, beside its name: a decision's title, a claim's statement
  const said = node.properties || {};
  const text = said.summary || said.statement || said.title || said.content || "";
  return typeof text === "string" && text !== node.label ? text : "";
}

function showWarnings(warnings) {
  const box = $("#warnings");
  box.hidden = !warnings.length;
  box.textContent = warnings.length ? `Left out: ${warnings.join("; ")}` : "";
}

// ---- sessions and the "as of" instant ----

async function loadSessions(me) {
  $("#who").textContent = `${me.name} (${me.role})`;
  const { sessions } = await api("/v1/sessions");
  const picker = $("#session");
  picker.replaceChildren();
  if (sessions.length !== 1) picker.append(el("option", { value: "", text: "all sessions" }));
  for (const info of sessions) {
    picker.append(el("option", { value: info.session, "data-session": info.session, text: `${info.session} (${info.events})` }));
  }
  const preferred = sessions.find((info) => !info.session.endsWith("-audit")) || sessions[0];
  state.session = preferred ? preferred.session : "";
  picker.value = state.session;
}

function setAsOf(asOf) {
  state.asOf = asOf;
  const badge = $("#as-of-badge");
  badge.textContent = asOf ? `as of ${shortTime(asOf)}` : "now + history";
  badge.classList.toggle("past", Boolean(asOf));
  badge.dataset.asOf = asOf || "";
  markTimeline();
}

// ---- the graph ----

async function loadGraph() {
  $("#graph-status").textContent = "loading...";
  const params = { session: state.session, as_of: state.asOf, search: state.search, limit: 200 };
  const graph = await api("/v1/graph/nodes", params);
  showWarnings(graph.warnings || []);
  draw(graph);
}

async function expand(nodeId) {
  const graph = await api("/v1/graph/neighbourhood", { node: nodeId, depth: 1, as_of: state.asOf, session: state.session });
  showWarnings(graph.warnings || []);
  const nodes = new Map(state.graph.nodes.map((n) => [n.id, n]));
  for (const node of graph.nodes) if (!nodes.has(node.id)) nodes.set(node.id, node);
  const seen = new Set(state.graph.edges.map((e) => `${e.source}|${e.target}|${e.type}`));
  const edges = [...state.graph.edges];
  for (const edge of graph.edges) if (!seen.has(`${edge.source}|${edge.target}|${edge.type}`)) edges.push(edge);
  draw({ nodes: [...nodes.values()], edges });
}

function rememberPositions() {
  if (!simulation) return;
  for (const node of simulation.nodes()) {
    positions.set(node.id, { x: node.x, y: node.y });
    positions.set(`name:${node.session}:${node.properties.name || node.label}`, { x: node.x, y: node.y });
  }
}

function draw(graph) {
  rememberPositions();
  state.graph = { nodes: graph.nodes, edges: graph.edges };
  const svg = d3.select("#graph");
  const { width, height } = svg.node().getBoundingClientRect();
  svg.selectAll("*").remove();
  const defs = svg.append("defs");
  for (const [id, fill] of [["arrow", "#59636e"], ["arrow-system", "#8a7dff"]]) {
    defs.append("marker").attr("id", id).attr("viewBox", "0 -5 10 10").attr("refX", 19).attr("refY", 0)
      .attr("markerWidth", 7).attr("markerHeight", 7).attr("orient", "auto")
      .append("path").attr("d", "M0,-5L10,0L0,5").attr("fill", fill);
  }
  const world = svg.append("g").attr("class", "world");
  const zoom = d3.zoom().scaleExtent([0.2, 4]).on("zoom", (event) => world.attr("transform", event.transform));
  svg.call(zoom);

  const nodes = graph.nodes.map((node) => {
    const known = positions.get(node.id) || positions.get(`name:${node.session}:${node.properties.name || node.label}`);
    return { ...node, x: known ? known.x : width / 2 + (Math.random() - 0.5) * 200, y: known ? known.y : height / 2 + (Math.random() - 0.5) * 200 };
  });
  const ids = new Set(nodes.map((n) => n.id));
  const links = graph.edges.filter((e) => ids.has(e.source) && ids.has(e.target)).map((e) => ({ ...e }));

  bend(links);
  const link = world.append("g").selectAll("path").data(links).join("path")
    .attr("class", (d) => (d.system ? "link system" : "link"))
    .attr("data-edge-type", (d) => d.type)
    .attr("data-edge-source", (d) => d.source)
    .attr("data-edge-target", (d) => d.target)
    .attr("marker-end", (d) => (d.system ? "url(#arrow-system)" : "url(#arrow)"));
  const linkLabel = world.append("g").attr("class", links.length > 120 ? "crowded" : "")
    .selectAll("text").data(links).join("text")
    .attr("class", "link-label").attr("text-anchor", "middle")
    .text((d) => (d.trust !== undefined && d.trust !== null ? `${d.type} ${Number(d.trust).toFixed(2)}` : d.type));

  const node = world.append("g").selectAll("g").data(nodes, (d) => d.id).join("g")
    .attr("class", (d) => `node${d.superseded ? " superseded" : ""}${state.selected === d.id ? " selected" : ""}`)
    .attr("data-node-id", (d) => d.id)
    .attr("data-kind", (d) => d.kind)
    .attr("data-superseded", (d) => String(Boolean(d.superseded)))
    .on("click", (event, d) => { event.stopPropagation(); select(d.id); })
    .call(d3.drag()
      .on("start", (event, d) => { if (!event.active) simulation.alphaTarget(0.2).restart(); d.fx = d.x; d.fy = d.y; })
      .on("drag", (event, d) => { d.fx = event.x; d.fy = event.y; })
      .on("end", (event, d) => { if (!event.active) simulation.alphaTarget(0); d.fx = null; d.fy = null; }));
  node.append("circle").attr("r", (d) => (d.kind === "entity" ? 7 : 10)).attr("fill", (d) => colour(d.kind));
  node.append("title").text((d) => `${d.kind}: ${d.label}`);
  node.append("text").attr("x", 13).attr("y", 4).text((d) => clip(d.label, 42));
  node.filter((d) => Boolean(subtitle(d))).append("text").attr("class", "sub").attr("x", 13).attr("y", 16)
    .text((d) => clip(subtitle(d), 48));

  const ticked = () => {
    link.attr("d", (d) => { const c = control(d); return `M${d.source.x},${d.source.y}Q${c.x},${c.y} ${d.target.x},${d.target.y}`; });
    linkLabel.attr("x", (d) => (d.source.x + 2 * control(d).x + d.target.x) / 4)
      .attr("y", (d) => (d.source.y + 2 * control(d).y + d.target.y) / 4 - 3);
    node.attr("transform", (d) => `translate(${d.x},${d.y})`);
  };
  simulation = d3.forceSimulation(nodes)
    .force("link", d3.forceLink(links).id((d) => d.id).distance(140).strength(0.5))
    .force("charge", d3.forceManyBody().strength(-600))
    .force("center", d3.forceCenter(width / 2, height / 2))
    .force("collide", d3.forceCollide(34))
    .force("x", d3.forceX(width / 2).strength(0.07)) // keeps unconnected groups near each other
    .force("y", d3.forceY(height / 2).strength(0.1))
    .stop();
  simulation.tick(positions.size ? 80 : 250); // settle before the first paint: no flying nodes
  ticked();
  fit(svg, zoom, nodes, width, height);
  simulation.on("tick", ticked).alpha(0.05).restart();
  svg.on("click", () => select(null));
  drawLegend(graph);
  $("#graph-status").textContent = `${nodes.length} nodes, ${links.length} edges`;
  document.body.dataset.graphVersion = String(Number(document.body.dataset.graphVersion || 0) + 1);
  if (state.selected && !ids.has(state.selected)) select(null);
}

function bend(links) {
  // edges between the same two nodes fan out as arcs, so each (and its label) can be seen
  const pairs = new Map();
  for (const link of links) {
    const key = [link.source, link.target].sort().join("|");
    if (!pairs.has(key)) pairs.set(key, []);
    pairs.get(key).push(link);
  }
  for (const group of pairs.values()) {
    group.forEach((link, index) => {
      const flip = link.source < link.target ? 1 : -1; // the same side whatever the edge's direction
      link.curve = (index - (group.length - 1) / 2) * 0.5 * flip;
    });
  }
}

function control(link) {
  // the quadratic curve's control point: off the straight line by `curve` times its length
  const [sx, sy, tx, ty] = [link.source.x, link.source.y, link.target.x, link.target.y];
  return { x: (sx + tx) / 2 - (ty - sy) * link.curve, y: (sy + ty) / 2 + (tx - sx) * link.curve };
}

function fit(svg, zoom, nodes, width, height) {
  // frame the drawn nodes (labels to their right) beside the legend, never zooming in beyond 1.3x
  if (!nodes.length) return;
  const legend = 190;
  const xs = nodes.map((n) => n.x);
  const ys = nodes.map((n) => n.y);
  const [x0, x1, y0, y1] = [Math.min(...xs) - 40, Math.max(...xs) + 200, Math.min(...ys) - 40, Math.max(...ys) + 40];
  const scale = Math.min(1.3, (width - legend) / (x1 - x0), height / (y1 - y0));
  const transform = d3.zoomIdentity.translate((width + legend) / 2, height / 2).scale(scale).translate(-(x0 + x1) / 2, -(y0 + y1) / 2);
  svg.call(zoom.transform, transform);
}

function drawLegend(graph) {
  const legend = $("#legend");
  legend.replaceChildren(el("h2", { text: "Legend" }));
  const kinds = [...new Set(graph.nodes.map((n) => n.kind))].sort();
  for (const kind of kinds) {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = colour(kind);
    legend.append(el("div", { class: "item", "data-legend-kind": kind }, swatch, kind));
  }
  if (!kinds.length) legend.append(el("div", { class: "muted", text: "no nodes" }));
  legend.append(el("hr"));
  legend.append(el("div", { class: "item" }, el("span", { class: "line" }), "domain edge"));
  legend.append(el("div", { class: "item" }, el("span", { class: "line dashed" }), "system edge (trust)"));
  const faded = el("span", { class: "swatch" });
  faded.style.background = "#8b96a5";
  faded.style.opacity = "0.45";
  legend.append(el("div", { class: "item" }, faded, "superseded"));
}

// ---- the panel: a node, an event ----

function citationLink(uri) {
  const match = /^eventloom:\/\/([A-Za-z0-9_-]+)\/events\/(\d+)/.exec(uri || "");
  if (!match) return el("span", { class: "muted", text: uri || "" });
  return el("a", {
    class: "citation", href: `/v1/events/${match[1]}/${match[2]}`, "data-citation": uri, text: uri,
    onclick: (event) => { event.preventDefault(); openEvent(match[1], Number(match[2])); },
  });
}

function propsTable(properties) {
  const table = el("table", { class: "props" });
  for (const [key, value] of Object.entries(properties || {})) {
    const text = typeof value === "object" ? JSON.stringify(value) : String(value);
    table.append(el("tr", {}, el("td", { text: key }), el("td", { text })));
  }
  return table;
}

function select(nodeId) {
  state.selected = nodeId;
  d3.selectAll(".node").classed("selected", (d) => d.id === nodeId);
  const details = $("#node-details");
  const node = state.graph.nodes.find((n) => n.id === nodeId);
  $("#panel-empty").hidden = Boolean(node);
  details.hidden = !node;
  $("#event-view").hidden = true;
  if (!node) return;
  const chip = el("span", { class: "chip", text: node.kind });
  chip.style.background = colour(node.kind);
  const versions = el("ol", { class: "versions" });
  for (const version of node.versions || []) {
    const summary = version.properties && (version.properties.summary || version.properties.statement);
    versions.append(el("li", { class: version.valid_to ? "closed" : "current" },
      el("div", { text: `${shortTime(version.valid_from)} → ${version.valid_to ? shortTime(version.valid_to) : "now"}` }),
      summary ? el("div", { text: summary }) : null,
      version.citation ? citationLink(version.citation) : null));
  }
  const citations = el("div", { id: "citations" });
  for (const uri of node.citations || []) citations.append(el("div", {}, citationLink(uri)));
  details.replaceChildren(
    el("h3", { text: node.label }),
    el("div", {}, chip, " ", node.superseded ? el("span", { class: "chip warn", text: "superseded" }) : null,
      el("span", { class: "muted", text: `  ${node.session || ""}` })),
    el("div", { class: "muted", "data-window": "", text: `valid ${shortTime(node.valid_from) || "?"} → ${node.valid_to ? shortTime(node.valid_to) : "now"}` }),
    el("h4", { text: "Properties" }), propsTable(node.properties),
    node.versions && node.versions.length ? el("h4", { text: `Versions (${node.versions.length})` }) : null,
    node.versions && node.versions.length ? versions : null,
    el("h4", { text: "Citations" }), citations,
    el("div", { class: "actions" }, el("button", { class: "ghost", id: "expand", type: "button", text: "Show neighbourhood", onclick: () => expand(node.id) })),
  );
}

async function openEvent(session, seq) {
  const view = $("#event-view");
  view.hidden = false;
  view.replaceChildren(el("div", { class: "muted", text: `loading ${session}/${seq}...` }));
  try {
    const event = await api(`/v1/events/${encodeURIComponent(session)}/${seq}`);
    view.replaceChildren(
      el("h4", { text: `Event ${event.session}/${event.seq}` }),
      el("div", { "data-event-type": event.type, text: `${event.type} by ${event.actor}` }),
      el("div", { class: "muted", text: shortTime(event.ts) }),
      el("div", { text: event.summary }),
      el("pre", { id: "event-payload", text: JSON.stringify(event.payload, null, 2) }),
      el("div", { class: "muted citation", text: `hash ${event.hash}` }),
    );
  } catch (error) {
    view.replaceChildren(el("div", { class: "chip warn", text: error.message }));
  }
}

// ---- the timeline ----

async function loadTimeline() {
  const list = $("#timeline");
  const slider = $("#as-of");
  if (!state.session) {
    state.events = [];
    list.replaceChildren(el("li", { class: "muted" }, el("span", {}), el("span", { text: "pick a session to see its timeline" })));
    slider.disabled = true;
    return;
  }
  const timeline = await api("/v1/timeline", { session: state.session, limit: 2000 });
  state.events = timeline.events;
  list.replaceChildren(...state.events.map((event, index) => el("li", {
    "data-seq": String(event.seq), title: event.citation,
    onclick: () => { slider.value = String(index); setAsOf(event.ts); loadGraph(); openEvent(state.session, event.seq); },
  }, el("span", { class: "seq", text: `#${event.seq}` }), el("span", { text: shortTime(event.ts) }),
  el("span", { class: "type", text: event.type }), el("span", { class: "muted", text: event.actor }),
  el("span", { text: event.summary }))));
  for (const warning of timeline.warnings || []) {  // messages on the subject that are not events, skipped
    list.append(el("li", { class: "muted" }, el("span", {}), el("span", { text: warning })));
  }
  slider.disabled = !state.events.length;
  slider.max = String(Math.max(0, state.events.length - 1));
  slider.value = slider.max;
  markTimeline();
}

function markTimeline() {
  const label = $("#as-of-label");
  const at = state.asOf;
  for (const row of document.querySelectorAll("#timeline li[data-seq]")) {
    const event = state.events.find((e) => String(e.seq) === row.dataset.seq);
    row.classList.toggle("future", Boolean(at && event && event.ts > at));
    row.classList.toggle("at", Boolean(at && event && event.ts === at));
  }
  const current = document.querySelector("#timeline li.at");
  if (current) current.scrollIntoView({ block: "nearest" });
  label.textContent = at ? `as of ${shortTime(at)}` : `${state.events.length} events`;
}

let sliderTimer = null;
function onSlider() {
  const event = state.events[Number($("#as-of").value)];
  if (!event) return;
  setAsOf(event.ts);
  clearTimeout(sliderTimer);
  sliderTimer = setTimeout(() => loadGraph().catch(report), 120);
}

// ---- the peers ----

function dot(status) {
  return el("span", { class: `dot ${status}`, title: status });
}

async function loadPeers() {
  const answer = await api("/v1/peers");
  const box = $("#peers");
  const peers = el("table", { id: "peer-table" }, el("tr", {}, el("th", { text: "peer" }), el("th", { text: "role" }), el("th", { text: "age" })));
  for (const peer of answer.peers) {
    peers.append(el("tr", { "data-peer-id": peer.id, "data-status": peer.status },
      el("td", {}, dot(peer.status), `${peer.host || ""}:${peer.pid || ""}`),
      el("td", { text: peer.role }), el("td", { text: `${Number(peer.age_s).toFixed(1)} s` })));
  }
  if (!answer.peers.length) peers.append(el("tr", {}, el("td", { class: "muted", text: "no heartbeats yet" })));
  const lags = el("table", { id: "lag-table" }, el("tr", {}, el("th", { text: "consumer" }), el("th", { text: "lag" }), el("th", { text: "behind" })));
  for (const consumer of answer.projectors) {
    const status = consumer.state === "failing" ? "failing" : consumer.lag ? "behind" : "caught-up";
    lags.append(el("tr", { "data-consumer": consumer.consumer, "data-lag": String(consumer.lag) },
      el("td", {}, dot(status), consumer.consumer), el("td", { text: String(consumer.lag) }),
      el("td", { text: consumer.lag_s === null || consumer.lag_s === undefined ? "?" : `${consumer.lag_s} s` })));
  }
  box.replaceChildren(peers, el("h2", { text: "Projector lag" }), lags);
  $("#peers-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

// ---- wiring ----

function report(error) {
  if (error && error.message === "logged out") return;
  showWarnings([String(error && error.message ? error.message : error)]);
}

async function refresh() {
  await Promise.all([loadGraph(), loadTimeline()]);
}

function start() {
  $("#session").addEventListener("change", (event) => {
    state.session = event.target.value;
    setAsOf(null);
    state.selected = null;
    positions.clear();
    refresh().catch(report);
  });
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.search = $("#search").value.trim();
    loadGraph().catch(report);
  });
  $("#search").addEventListener("search", () => { state.search = $("#search").value.trim(); loadGraph().catch(report); });
  $("#as-of").addEventListener("input", onSlider);
  $("#history").addEventListener("click", () => { setAsOf(null); $("#as-of").value = $("#as-of").max; loadGraph().catch(report); });
  window.addEventListener("resize", () => draw(state.graph));
  api("/v1/me").then((me) => {
    watchPeers(me);
    return loadSessions(me);
  }).then(refresh).then(() => { document.body.dataset.ready = "true"; }).catch(report);
}

function watchPeers(me) {
  // the peers (hosts, pids, URLs) are for admin tokens only: /v1/peers refuses the others with 403
  if (me.role !== "admin") {
    $("#peers").replaceChildren(el("p", { class: "muted", text: "Peers are shown to admin tokens only." }));
    return;
  }
  loadPeers().catch(report);
  setInterval(() => loadPeers().catch(report), 5000);
}

document.addEventListener("DOMContentLoaded", start);
