// logflume console: polls the server's JSON every few seconds and redraws the page.
// Everything from the server goes into the DOM through textContent, never as HTML.
"use strict";

const REFRESH_MS = 3000;
const state = { cluster: null, topicsSeen: "", browsed: null, configs: null };

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function row(cells, attrs) {
  const tr = el("tr", attrs);
  for (const c of cells) {
    if (c instanceof Node) {
      tr.appendChild(c);
    } else {
      tr.appendChild(el("td", c.attrs, c.text));
    }
  }
  return tr;
}

function num(value, digits) {
  if (value === null || value === undefined) return "—";
  return Number(value).toFixed(digits || 0);
}

function bytes(value) {
  if (value === null || value === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(value);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

function showError(id, message) {
  const node = document.getElementById(id);
  if (!node) return;
  node.hidden = !message;
  node.textContent = message || "";
}

function replaceBody(table, rows) {
  const tbody = document.querySelector(table + " tbody");
  tbody.replaceChildren(...rows);
}

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (resp.status === 401) {  // the session ended (or the console restarted): log in again
    window.location.assign("/login");
    throw new Error("login required");
  }
  if (!resp.ok && resp.status !== 400) throw new Error(url + ": HTTP " + resp.status);
  return resp.json();
}

// ---- cluster and topics -------------------------------------------------------

function renderCluster(part) {
  showError("cluster-error", part.error ? "cluster: " + part.error : "");
  const data = part.data;
  if (!data) return;
  state.cluster = data;
  document.getElementById("controller").textContent =
    data.controller === null ? "—" : "broker " + data.controller;
  document.getElementById("cluster-id").textContent = data.cluster_id || "—";
  replaceBody("#brokers", data.brokers.map((b) => row([
    clickable(el("td", { class: "broker-id", title: "its configs" }, b.id),
      () => showConfigs("broker", String(b.id))),
    { text: b.host }, { text: b.port, attrs: { class: "num" } },
    { text: b.id === data.controller ? "controller" : "" },
  ], { "data-broker": b.id })));
  renderTopics();
  fillTopicChoice(data.topics);
  fillConfigChoice(data);
}

function clickable(node, action) {
  node.classList.add("clickable");
  node.addEventListener("click", action);
  return node;
}

function renderTopics() {
  const data = state.cluster;
  if (!data) return;
  const internal = document.getElementById("show-internal").checked;
  const note = data.sizes_error ? "sizes: " + data.sizes_error
    : data.sizes_from ? "sizes from the brokers' metrics"
    : "sizes need --broker-metrics";
  document.getElementById("sizes-note").textContent = note;
  const rows = [];
  for (const t of data.topics) {
    if (t.internal && !internal) continue;
    rows.push(row([
      clickable(el("td", { class: "topic-name", title: "its configs" }, t.name),
        () => showConfigs("topic", t.name)),
      { text: t.error ? "error: " + t.error
        : t.partitions.length + (t.partitions.length === 1 ? " partition" : " partitions") },
      { text: "" }, { text: "" }, { text: "" }, { text: "" },
      { text: num(t.messages), attrs: { class: "num" } },
      { text: bytes(t.size), attrs: { class: "num" } },
      { text: num(t.rate, 1), attrs: { class: "num topic-rate" } },
    ], { class: "topic-row", "data-topic": t.name }));
    for (const p of t.partitions) {
      const under = p.isr.length < p.replicas.length;
      rows.push(row([
        { text: "" },
        { text: p.partition, attrs: { class: "num" } },
        { text: p.leader < 0 ? "none" : p.leader, attrs: { class: "leader" } },
        { text: p.replicas.join(","), attrs: { class: "replicas" } },
        { text: p.isr.join(","), attrs: { class: under ? "isr under-replicated" : "isr" } },
        { text: num(p.low) + " – " + num(p.high), attrs: { class: "num" } },
        { text: p.high === null || p.low === null ? "—" : p.high - p.low, attrs: { class: "num" } },
        { text: bytes(p.size), attrs: { class: "num size" } },
        { text: num(p.rate, 1), attrs: { class: "num" } },
      ], { "data-topic": t.name, "data-partition": p.partition }));
    }
  }
  replaceBody("#topics", rows);
}

function fillTopicChoice(topics) {
  const names = topics.map((t) => t.name);
  const key = names.join("\n");
  if (key === state.topicsSeen) return;
  state.topicsSeen = key;
  const select = document.getElementById("mb-topic");
  const chosen = select.value;
  select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  const first = topics.find((t) => !t.internal);
  if (names.includes(chosen)) select.value = chosen;
  else if (first) select.value = first.name;
}

// ---- groups -------------------------------------------------------------------

function renderGroups(part) {
  showError("groups-error", part.error ? "groups: " + part.error : "");
  if (!part.data) return;
  const rows = [];
  for (const g of part.data.groups) {
    const total = g.lag === null ? "—" : g.lag;
    rows.push(row([
      { text: g.group, attrs: { class: "group-name" } }, { text: g.state },
      { text: g.error ? "error: " + g.error : "" }, { text: "" }, { text: "" }, { text: "" },
      { text: total, attrs: { class: "num group-lag" } },
    ], { class: "group-row", "data-group": g.group }));
    for (const p of g.partitions) {
      rows.push(row([
        { text: "" }, { text: "" }, { text: p.topic },
        { text: p.partition, attrs: { class: "num" } },
        { text: p.committed < 0 ? "—" : p.committed, attrs: { class: "num" } },
        { text: num(p.high), attrs: { class: "num" } },
        { text: p.lag === null ? "—" : p.lag, attrs: { class: "num lag" } },
      ], { "data-group": g.group, "data-topic": p.topic, "data-partition": p.partition }));
    }
  }
  if (!rows.length) rows.push(row([{ text: "no consumer groups", attrs: { colspan: 7 } }]));
  replaceBody("#groups", rows);
  const members = [];
  for (const g of part.data.groups) {
    for (const m of g.members || []) {
      members.push(row([
        { text: g.group }, { text: m.member_id, attrs: { class: "member-id" } },
        { text: m.client_id, attrs: { class: "client-id" } }, { text: m.host, attrs: { class: "host" } },
        { text: m.assignment.map((a) => a.topic + "-" + a.partition).join(", "),
          attrs: { class: "assignment" } },
      ], { class: "member-row", "data-group": g.group, "data-member": m.member_id }));
    }
  }
  if (!members.length) members.push(row([{ text: "no members", attrs: { colspan: 5 } }]));
  replaceBody("#members", members);
}

// ---- configs ------------------------------------------------------------------

function fillConfigChoice(data) {
  const select = document.getElementById("cfg-entity");
  const names = data.brokers.map((b) => "broker:" + b.id)
    .concat(data.topics.map((t) => "topic:" + t.name));
  const key = names.join("\n");
  if (select.dataset.seen === key) return;
  select.dataset.seen = key;
  const chosen = select.value;
  select.replaceChildren(...names.map((n) => el("option", { value: n },
    n.replace(":", " "))));
  if (names.includes(chosen)) select.value = chosen;
}

function renderConfigs() {
  const answer = state.configs;
  if (!answer) return;
  showError("cfg-error", answer.error || "");
  const data = answer.data;
  if (!data) { replaceBody("#cfg-table", []); return; }
  const all = document.getElementById("cfg-all").checked;
  const shown = data.configs.filter((c) => all || c.source !== "DEFAULT_CONFIG");
  document.getElementById("cfg-note").textContent = data.type + " " + data.name + ": " +
    shown.length + " of " + data.configs.length + " configs" +
    (all ? "" : " (those set somewhere; tick \u201cshow defaults\u201d for all)");
  replaceBody("#cfg-table", shown.map((c) => row([
    { text: c.name, attrs: { class: "cfg-name" } },
    { text: c.sensitive ? "(sensitive)" : c.value === null ? "null" : c.value,
      attrs: { class: "cfg-value" } },
    { text: c.source, attrs: { class: "cfg-source" } },
    { text: c.read_only ? "read-only" : "", attrs: { class: "muted" } },
  ], { "data-config": c.name })));
}

async function showConfigs(kind, name) {
  const select = document.getElementById("cfg-entity");
  if (kind && name) select.value = kind + ":" + name;
  const [type, ...rest] = select.value.split(":");
  if (!type) return;
  document.getElementById("cfg-note").textContent = "reading…";
  try {
    state.configs = await getJSON("/api/configs?" +
      new URLSearchParams({ type, name: rest.join(":") }).toString());
  } catch (err) {
    state.configs = { data: null, error: String(err) };
  }
  renderConfigs();
  if (kind) document.getElementById("configs-section").scrollIntoView();
}

// ---- agents -------------------------------------------------------------------

function fillBar(fraction) {
  const td = el("td", { class: "channel-fill" });
  if (fraction === null || fraction === undefined) { td.textContent = "—"; return td; }
  const bar = el("span", { class: "fill" });
  const inner = el("span");
  inner.style.width = Math.min(100, fraction * 100).toFixed(1) + "%";
  bar.appendChild(inner);
  td.appendChild(bar);
  td.appendChild(document.createTextNode((fraction * 100).toFixed(1) + " %"));
  return td;
}

function renderAgents(part) {
  const box = document.getElementById("agents");
  if (part.error) { box.replaceChildren(el("p", { class: "error" }, part.error)); return; }
  if (!part.data || !part.data.agents.length) return;
  box.replaceChildren(...part.data.agents.map((a) => {
    const div = el("div", { class: "agent", "data-agent": a.url });
    const h3 = el("h3", {}, a.url + " ");
    h3.appendChild(el("span", { class: "agent-status status-" + a.status }, a.status));
    div.appendChild(h3);
    if (a.error) div.appendChild(el("p", { class: "error" }, a.error));
    const table = el("table", { class: "components" });
    const head = el("tr");
    for (const h of ["Kind", "Component", "State", "Events/s", "Total", "Channel fill"]) {
      head.appendChild(el("th", {}, h));
    }
    table.appendChild(head);
    for (const c of a.components) {
      table.appendChild(row([
        { text: c.kind }, { text: c.name, attrs: { class: "component-name" } },
        { text: c.state, attrs: { class: "component-state state-" + c.state } },
        { text: c.kind === "channel" ? "" : num(c.rate, 1), attrs: { class: "num" } },
        { text: c.kind === "channel" ? num(c.events) + " / " + num(c.capacity)
          : num(c.events_total), attrs: { class: "num" } },
        c.kind === "channel" ? fillBar(c.fill) : el("td", {},
          c.oldest_age ? "oldest undelivered " + num(c.oldest_age, 1) + " s" : ""),
      ], { "data-component": c.kind + "." + c.name }));
    }
    div.appendChild(table);
    return div;
  }));
}

// ---- per-minute chart ---------------------------------------------------------

function renderStats(part) {
  showError("stats-error", part.error ? "stats: " + part.error : "");
  if (!part.data) return;
  drawChart(part.data.points);
}

function drawChart(points) {
  const canvas = document.getElementById("chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  const left = 60, right = 20, top = 20, bottom = 30;
  ctx.clearRect(0, 0, w, h);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, w, h);
  canvas.setAttribute("data-points", String(points.length));
  const note = document.getElementById("chart-note");
  if (!points.length) { note.textContent = "no per-minute rows yet"; return; }
  const max = Math.max(1, ...points.map((p) => p.requests));
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const span = Math.max(60, t1 - t0);
  const x = (t) => left + ((t - t0) / span) * (w - left - right);
  const y = (v) => h - bottom - (v / max) * (h - top - bottom);
  ctx.strokeStyle = "#c5cbd3";
  ctx.fillStyle = "#6b7483";
  ctx.font = "12px sans-serif";
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(left, top); ctx.lineTo(left, h - bottom); ctx.lineTo(w - right, h - bottom);
  ctx.stroke();
  ctx.fillText(String(max), 5, top + 4);
  ctx.fillText("0", 5, h - bottom);
  const label = (t) => new Date(t * 1000).toISOString().slice(11, 16);
  ctx.fillText(label(t0), left, h - 10);
  if (t1 !== t0) ctx.fillText(label(t1), w - right - 40, h - 10);
  ctx.strokeStyle = "#3a78c3";
  ctx.lineWidth = 2;
  ctx.beginPath();
  points.forEach((p, i) => {
    if (i === 0) ctx.moveTo(x(p.t), y(p.requests)); else ctx.lineTo(x(p.t), y(p.requests));
  });
  ctx.stroke();
  for (const p of points) {
    ctx.fillStyle = p.final ? "#3a78c3" : "#e0a030";
    ctx.beginPath();
    ctx.arc(x(p.t), y(p.requests), 4, 0, 2 * Math.PI);
    ctx.fill();
  }
  const last = points[points.length - 1];
  note.textContent = points.length + " minutes; latest " + label(last.t) + " UTC: " +
    last.requests + " requests (" + (last.final ? "final" : "provisional") +
    "), 5xx " + last.status_5xx + "; orange points are provisional";
}

// ---- audit --------------------------------------------------------------------

const AUDIT_MARK = {
  complete: "✓", missing: "−", duplicated: "+", "checksum differs": "≠",
  "still open": "…", "no agent count": "?", unchecked: "·",
};

function minuteLabel(ms) {
  return new Date(ms).toISOString().slice(11, 16);
}

function showAuditCell(row, minute, cell) {
  const box = document.getElementById("audit-detail");
  const tiers = Object.entries(cell.tiers).map(([tier, t]) =>
    tier + " " + t.count + " (checksum " + t.checksum + ")");
  box.textContent = row.host + " " + row.topic + " " + minuteLabel(minute) + " UTC: " +
    cell.text + "; " + tiers.join(", ");
  box.className = "audit-detail status-" + cell.status.replaceAll(" ", "-");
}

function renderAudit(part) {
  showError("audit-error", part.error ? "audit: " + part.error : "");
  const data = part.data;
  if (!data || !data.rows.length) return;
  const head = document.querySelector("#audit-grid thead tr");
  head.replaceChildren(el("th", {}, "Host"), el("th", {}, "Topic"),
    ...data.minutes.map((m, i) => el("th", { class: "minute" },
      i % 5 === 0 || i === data.minutes.length - 1 ? minuteLabel(m) : "")));
  replaceBody("#audit-grid", data.rows.map((r) => {
    const tr = row([{ text: r.host || "—" }, { text: r.topic }],
      { "data-host": r.host, "data-topic": r.topic });
    r.cells.forEach((cell, i) => {
      const minute = data.minutes[i];
      const td = el("td", {
        class: "audit-cell" + (cell ? " status-" + cell.status.replaceAll(" ", "-") : ""),
        "data-minute": minuteLabel(minute),
        title: cell ? minuteLabel(minute) + " " + cell.text : "",
      }, cell ? AUDIT_MARK[cell.status] || "" : "");
      if (cell) td.addEventListener("click", () => showAuditCell(r, minute, cell));
      tr.appendChild(td);
    });
    return tr;
  }));
  const parts = Object.entries(data.summary).map(([k, n]) => n + " " + k);
  document.getElementById("audit-note").textContent =
    "last " + data.minutes.length + " minutes: " + parts.join(", ");
}

// ---- message browser ----------------------------------------------------------

async function browse(event) {
  if (event) event.preventDefault();
  const topic = document.getElementById("mb-topic").value;
  const partition = document.getElementById("mb-partition").value || "0";
  const n = document.getElementById("mb-n").value || "20";
  const from = document.getElementById("mb-from").value;
  if (!topic) return;
  const query = new URLSearchParams({ topic, partition, n, from });
  if (from !== "last") query.set("at", document.getElementById("mb-at").value);
  document.getElementById("mb-note").textContent = "reading…";
  try {
    state.browsed = await getJSON("/api/messages?" + query.toString());
  } catch (err) {
    state.browsed = { data: null, error: String(err) };
  }
  renderMessages();
}

const STOPPED = {
  end: (d) => "end of partition at the last stable offset " + d.last_stable +
    (d.last_stable < d.high ? " (high watermark " + d.high + ": a transaction is still open)" : ""),
  count: () => "more follow",
  timeout: () => "timed out before the end",
};

function renderMessages() {
  const answer = state.browsed;
  if (!answer) return;
  showError("mb-error", answer.error || "");
  const data = answer.data;
  if (!data) { document.getElementById("mb-note").textContent = ""; replaceBody("#mb-table", []); return; }
  const pretty = document.getElementById("mb-pretty").checked;
  const note = document.getElementById("mb-note");
  note.textContent = data.topic + "-" + data.partition + ": offsets " + data.low + " – " +
    data.high + ", " + data.records.length + " shown from " + data.start + "; " +
    STOPPED[data.stopped](data);
  note.dataset.stopped = data.stopped;
  replaceBody("#mb-table", data.records.map((r) => row([
    { text: r.offset, attrs: { class: "num offset" } },
    { text: r.timestamp === null ? "—" : new Date(r.timestamp).toISOString(),
      attrs: { class: "timestamp" } },
    { text: r.key === null ? "null" : r.key, attrs: { class: "key" } },
    { text: pretty && r.json !== null ? r.json : r.value === null ? "null" : r.value,
      attrs: { class: pretty && r.json !== null ? "value json" : "value" } },
    { text: r.headers.map(([k, v]) => k + "=" + (v === null ? "null" : v)).join("\n"),
      attrs: { class: "headers" } },
  ], { "data-offset": r.offset })));
}

function seekChosen() {
  const from = document.getElementById("mb-from").value;
  const at = document.getElementById("mb-at");
  at.hidden = from === "last";
  at.placeholder = from === "offset" ? "offset" : "2026-11-29T07:00:00Z or epoch ms";
}

async function showSession() {
  try {
    const session = await getJSON("/api/session");
    if (!session.login) return;
    document.getElementById("session-user").textContent = session.user || "";
    document.getElementById("logout-form").hidden = false;
  } catch (err) {
    // the status line says when the console cannot be reached
  }
}

// ---- polling ------------------------------------------------------------------

async function poll() {
  const status = document.getElementById("status");
  try {
    const [cluster, groups, agents, stats, audit] = await Promise.all(
      ["cluster", "groups", "agents", "stats", "audit"].map((p) => getJSON("/api/" + p)));
    renderCluster(cluster);
    renderGroups(groups);
    renderAgents(agents);
    renderStats(stats);
    renderAudit(audit);
    const stamp = cluster.updated ? new Date(cluster.updated * 1000).toLocaleTimeString() : "—";
    status.textContent = "updated " + stamp;
    status.className = "muted";
  } catch (err) {
    status.textContent = "console server unreachable: " + String(err);
    status.className = "error";
  }
}

async function loop() {
  await poll();
  setTimeout(loop, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("mb-form").addEventListener("submit", browse);
  document.getElementById("mb-from").addEventListener("change", seekChosen);
  document.getElementById("mb-pretty").addEventListener("change", renderMessages);
  document.getElementById("cfg-form").addEventListener("submit", (event) => {
    event.preventDefault();
    showConfigs();
  });
  document.getElementById("cfg-all").addEventListener("change", renderConfigs);
  showSession();
  document.getElementById("show-internal").addEventListener("change", renderTopics);
  loop();
});
