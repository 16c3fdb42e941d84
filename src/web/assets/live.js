// The live page (perf-exporter): frames from /api/v1/stream fill the
// cards. The frame schema is in docs/src/guide/live-view.md ("The frame"). No libraries.
"use strict";
const HISTORY = 180; // points per sparkline: three minutes at 1s
const history = new Map();
let frames = 0;

function human(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(2) + " G";
  if (a >= 1e6) return (v / 1e6).toFixed(2) + " M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + " k";
  return v.toFixed(a < 10 ? 2 : 0);
}

// How a card shows its value (data-unit).
const FORMAT = {
  ratio: (v) => v.toFixed(3),
  percent: (v) => (100 * v).toFixed(2) + " %",
  rate: (v) => human(v) + "/s",
  mbps: (v) => (v / 1e6).toFixed(1) + " MB/s",
};

function spark(card, key, v) {
  const h = history.get(key) || [];
  h.push(v);
  if (h.length > HISTORY) h.shift();
  history.set(key, h);
  const line = card.querySelector(".spark polyline");
  if (!line) return;
  const max = Math.max(...h.filter((x) => x !== null), 1e-12);
  const pts = h.map((x, i) => `${(i * 180) / (HISTORY - 1)},${40 - (38 * (x || 0)) / max}`);
  line.setAttribute("points", pts.join(" "));
}

function showCard(card, frame) {
  const key = card.dataset.derived;
  const value = card.querySelector(".value");
  const reason = card.querySelector(".reason");
  const why = frame.unavailable[key];
  card.classList.toggle("unavailable", why !== undefined);
  if (why !== undefined) {
    value.textContent = "not available on this host";
    value.dataset.raw = "";
    // A cause shared by several cards is said once, in the note below
    // the cards (data-why: the cause only).
    reason.textContent = card.dataset.why || why;
    return;
  }
  reason.textContent = "";
  const v = frame.derived[key];
  value.dataset.raw = v === null ? "" : String(v);
  value.textContent = v === null ? "– (no events this interval)" : FORMAT[card.dataset.unit](v);
  spark(card, key, v);
  const list = card.querySelector(".sockets");
  if (list) {
    list.replaceChildren(...Object.entries(frame.per_socket).map(([s, rates]) => {
      const li = document.createElement("li");
      const r = rates[key];
      li.textContent = `socket ${s}: ` + (r == null ? "–" : FORMAT.mbps(r));
      return li;
    }));
  }
}

// Per-CPU heatmap: IPC where there is a PMU, else busy time (MPERF/TSC),
// else context switches/s as a sign of activity.
const HEAT = [
  ["ipc", "IPC", FORMAT.ratio],
  ["busy_ratio", "busy (MPERF/TSC)", FORMAT.percent],
  ["context_switches_per_second", "context switches/s (no PMU, no MPERF here)", human],
];

// frame.per_cpu is in columns: the CPU numbers once, an array of counts
// per metric in that order, and the formulas of the per-CPU derived
// values, which are computed here: {ratio: [num, den]} (none where den is
// 0 or an input is missing) or {rate: metric} (per second).
function perCpuColumn(pc, interval, key) {
  const f = (pc.formulas || {})[key];
  if (!f) return null;
  const col = (m) => pc.counts[m] || [];
  if (f.ratio) {
    const [n, d] = f.ratio.map(col);
    return pc.cpus.map((_, i) => (n[i] != null && d[i] > 0 ? n[i] / d[i] : null));
  }
  const c = col(f.rate);
  return pc.cpus.map((_, i) => (c[i] != null && interval > 0 ? c[i] / interval : null));
}

function showHeatmap(frame) {
  const pc = frame.per_cpu || { cpus: [], counts: {}, formulas: {} };
  const cols = HEAT.map(([k]) => perCpuColumn(pc, frame.interval_seconds, k));
  const at = cols.findIndex((c) => c && c.some((v) => typeof v === "number"));
  const pick = HEAT[at];
  const card = document.getElementById("heatmap");
  if (!pick) {
    card.classList.add("unavailable");
    card.querySelector(".reason").textContent = frame.unavailable.ipc || "no per-CPU values";
    return;
  }
  const [key, label, fmt] = pick;
  const col = cols[at];
  card.dataset.metric = key;
  card.querySelector("h2").textContent = "Per-CPU " + label;
  // The colours span this frame's lowest to highest value (blue to red),
  // as the legend says; values within 0.5% of each other are one
  // neutral colour: equal is not "hot".
  const nums = col.filter((v) => typeof v === "number");
  const lo = Math.min(...nums);
  const hi = Math.max(...nums);
  const equal = hi - lo <= 0.005 * Math.max(Math.abs(hi), Math.abs(lo));
  const colour = (v) =>
    v == null ? "#eee" : equal ? NEUTRAL : `hsl(${210 - (210 * (v - lo)) / (hi - lo)}, 70%, 80%)`;
  card.querySelector(".cells").replaceChildren(...pc.cpus.map((cpu, i) => {
    const v = col[i];
    const d = document.createElement("div");
    d.className = "cell";
    d.dataset.cpu = String(cpu);
    d.dataset.raw = v == null ? "" : String(v);
    d.style.background = colour(v);
    d.textContent = `${cpu}: ` + (v == null ? "–" : fmt(v));
    return d;
  }));
  const legend = card.querySelector(".legend");
  legend.dataset.lo = String(lo);
  legend.dataset.hi = String(hi);
  legend.classList.toggle("equal", equal);
  legend.querySelector(".lo").textContent = equal ? "" : fmt(lo);
  legend.querySelector(".hi").textContent = equal
    ? `every CPU within 0.5%: ${fmt(lo)} to ${fmt(hi)}`
    : fmt(hi);
}

// The heatmap's colour where every CPU has the same value.
const NEUTRAL = "hsl(210, 15%, 85%)";

// The per-workload top list (frame.per_cgroup): the busiest cgroups, with
// the cgroups counted inside them (a pod's containers) on indented rows.
// A container's counts are already in its pod's: rows are never summed.
const CGROUP_COLUMNS = [
  ["cpu_share", FORMAT.percent],
  ["cycles_share", FORMAT.percent],
  ["ipc", FORMAT.ratio],
  ["context_switches_per_second", FORMAT.rate],
];

function cgroupName(row) {
  const l = row.labels;
  if (l.container_id) return "container " + l.container_id.slice(0, 12);
  if (l.pod_uid) return `pod ${l.pod_uid}` + (l.qos_class ? ` (${l.qos_class})` : "");
  return row.cgroup;
}

function cgroupRows(rows, depth, out) {
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.className = "cgroup-row" + (depth > 0 ? " nested" : "");
    tr.dataset.cgroup = row.cgroup;
    tr.dataset.depth = String(depth);
    const name = document.createElement("td");
    name.textContent = cgroupName(row);
    name.title = row.cgroup;
    name.style.paddingLeft = `${0.3 + 1.5 * depth}em`;
    tr.append(name);
    for (const [key, fmt] of CGROUP_COLUMNS) {
      const td = document.createElement("td");
      const v = row.derived[key];
      td.dataset.key = key;
      td.dataset.raw = v == null ? "" : String(v);
      td.textContent = v === undefined ? "n/a" : v === null ? "–" : fmt(v);
      tr.append(td);
    }
    out.push(tr);
    cgroupRows(row.nested || [], depth + 1, out);
  }
  return out;
}

window.showCgroups = (top) => {
  const sec = document.getElementById("cgroup-top");
  sec.hidden = false;
  const shown = top.top.length;
  sec.querySelector(".summary").textContent =
    `${top.counted} cgroups counted; the ${shown} busiest by ${top.rank_by}` +
    " (n/a: not counted per cgroup on this host).";
  sec.querySelector("tbody").replaceChildren(...cgroupRows(top.top, 0, []));
};

function show(frame) {
  frames += 1;
  for (const card of document.querySelectorAll(".card[data-derived]")) showCard(card, frame);
  showHeatmap(frame);
  if (frame.per_cgroup) window.showCgroups(frame.per_cgroup);
  const st = document.getElementById("status");
  st.dataset.frames = String(frames);
  st.textContent = `live: ${frames} frames, every ${frame.interval_seconds.toFixed(2)} s`;
}

// The API under the page's own path (a reverse proxy's prefix, or
// --web.route-prefix), so "/api/v1/..." of the page's origin is not assumed.
const BASE = location.pathname.replace(/[^/]*$/, "");

// The page is painted at once from the last collection (/api/v1/snapshot),
// then frame by frame from the stream; the snapshot does not count as a
// stream frame.
async function paintSnapshot() {
  try {
    const r = await fetch(`${BASE}api/v1/snapshot`, { cache: "no-store" });
    if (!r.ok || frames > 0) return;
    const frame = await r.json();
    if (frames > 0) return;
    for (const card of document.querySelectorAll(".card[data-derived]")) showCard(card, frame);
    showHeatmap(frame);
    if (frame.per_cgroup) window.showCgroups(frame.per_cgroup);
    const st = document.getElementById("status");
    st.dataset.snapshot = "1";
    st.textContent = "last collection shown; connecting to the live stream…";
  } catch (e) {
    // The stream paints the page when it connects.
  }
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}${BASE}api/v1/stream?interval=1s`);
  ws.onmessage = (e) => show(JSON.parse(e.data));
  ws.onclose = (e) => {
    document.getElementById("status").textContent =
      `stream closed (${e.code}${e.reason ? ": " + e.reason : ""}); reconnecting…`;
    setTimeout(connect, 2000);
  };
}
paintSnapshot();
connect();
