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
  // A value this frame does not have (the server makes a card of each
  // entry of the derived table the frames come from; this keeps one
  // frame from stopping the page).
  card.hidden = v === undefined;
  if (v === undefined) return;
  value.dataset.raw = v === null ? "" : String(v);
  value.textContent = v === null ? "– (no events this interval)" : formatOf(card.dataset.unit)(v);
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

// A derived value's name as a heading ("busy_ratio" -> "busy ratio").
function title(name) {
  return name.replace(/_/g, " ");
}

// The format the frame gives a derived value (percent, rate or ratio).
function formatOf(hint) {
  return FORMAT[hint] || FORMAT.ratio;
}

// Per-CPU heatmap. Its choices are the per-CPU derived values of the
// frame (per_cpu.formulas: the config's derived table, in the order the
// server prefers them: IPC where there is a PMU, else busy time from
// MPERF/TSC, else the OS event rates); the first with a value is shown
// unless one is picked in the card's list.
let heatPicked = "";

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
  const card = document.getElementById("heatmap");
  const formulas = pc.formulas || {};
  const choices = Object.keys(formulas)
    .map((k) => [k, perCpuColumn(pc, frame.interval_seconds, k)])
    .filter(([, c]) => c && c.some((v) => typeof v === "number"));
  const select = card.querySelector("select.pick");
  const names = choices.map(([k]) => k);
  if (select.dataset.choices !== names.join(",")) {
    select.dataset.choices = names.join(",");
    select.replaceChildren(...names.map((k) => {
      const o = document.createElement("option");
      o.value = k;
      o.textContent = title(k);
      return o;
    }));
  }
  select.hidden = names.length < 2;
  const pick = choices.find(([k]) => k === heatPicked) || choices[0];
  card.classList.toggle("unavailable", !pick);
  if (!pick) {
    card.dataset.metric = "";
    card.querySelector(".cells").replaceChildren();
    card.querySelector(".reason").textContent = frame.unavailable.ipc || "no per-CPU values";
    return;
  }
  card.querySelector(".reason").textContent = "";
  const [key, col] = pick;
  const fmt = formatOf(formulas[key].format);
  select.value = key;
  card.dataset.metric = key;
  card.dataset.format = formulas[key].format || "";
  card.querySelector("h2").textContent = "Per-CPU " + title(key);
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
// Its columns are the frame's (per_cgroup.derived: the derived values of
// the config's table whose inputs are counted per cgroup).

function cgroupName(row) {
  const l = row.labels;
  if (l.container_id) return "container " + l.container_id.slice(0, 12);
  if (l.pod_uid) return `pod ${l.pod_uid}` + (l.qos_class ? ` (${l.qos_class})` : "");
  return row.cgroup;
}

function cgroupRows(rows, depth, out, columns) {
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
    for (const c of columns) {
      const td = document.createElement("td");
      const v = row.derived[c.name];
      td.dataset.key = c.name;
      td.dataset.raw = v == null ? "" : String(v);
      td.textContent = v === undefined ? "n/a" : v === null ? "–" : formatOf(c.format)(v);
      // Why this cgroup has no value (the input it lacks, as the cards say it).
      const why = (row.unavailable || {})[c.name];
      if (why) td.title = why;
      tr.append(td);
    }
    const act = document.createElement("td");
    const btn = document.createElement("button");
    btn.className = "profile";
    btn.textContent = "flame graph";
    btn.disabled = flameBusy;
    act.append(btn);
    tr.append(act);
    tr.classList.toggle("picked", flamePicked !== null && flamePicked.cgroup === row.cgroup);
    tr.flameTarget = flameTarget(row);
    out.push(tr);
    cgroupRows(row.nested || [], depth + 1, out, columns);
  }
  return out;
}

window.showCgroups = (top) => {
  const sec = document.getElementById("cgroup-top");
  sec.hidden = false;
  document.getElementById("flame").hidden = false;
  const shown = top.top.length;
  const columns = top.derived || [];
  sec.querySelector(".summary").textContent =
    `${top.counted} cgroups counted; the ${shown} busiest by ${top.rank_by}` +
    " (derived values whose inputs are counted per cgroup; n/a: an input did not count in that cgroup).";
  const head = sec.querySelector("thead tr");
  const keys = columns.map((c) => c.name).join(",");
  if (head.dataset.keys !== keys) {
    head.dataset.keys = keys;
    const th = (text, key) => {
      const e = document.createElement("th");
      e.textContent = text;
      if (key) e.dataset.key = key;
      return e;
    };
    head.replaceChildren(th("cgroup"), ...columns.map((c) => th(title(c.name), c.name)), th("profile"));
  }
  sec.querySelector("tbody").replaceChildren(...cgroupRows(top.top, 0, [], columns));
};

// The flame graph (an icicle: the outermost frame on top) of a workload
// picked in the top list: GET api/v1/profile?format=json samples it for
// the seconds chosen, and the tree it answers (src/export/flame.rs) is
// drawn here as SVG. Names go into the page as text only.
let flamePicked = null; // {cgroup, query, what}
let flameBusy = false;
let flameData = null;
let flameZoom = [];
const SVG = "http://www.w3.org/2000/svg";
const FLAME_ROW = 17;

// What a row's profile asks: a pod by its uid (its containers too), else
// the cgroup itself (the processes in it, not those of cgroups below it).
function flameTarget(row) {
  const uid = row.labels.pod_uid;
  if (uid && !row.labels.container_id) {
    return { cgroup: row.cgroup, query: "pod=" + encodeURIComponent(uid), what: "pod " + uid };
  }
  return {
    cgroup: row.cgroup,
    query: "cgroup=" + encodeURIComponent(row.cgroup),
    what: `cgroup ${row.cgroup} (its own processes, not those of cgroups below it)`,
  };
}

function flameState(state, text) {
  const p = document.querySelector("#flame .state");
  p.dataset.state = state;
  p.textContent = text;
}

function flameButtons() {
  for (const b of document.querySelectorAll("#cgroup-top button.profile")) b.disabled = flameBusy;
}

async function takeProfile(target) {
  flamePicked = target;
  flameBusy = true;
  flameButtons();
  for (const tr of document.querySelectorAll("#cgroup-top tr.cgroup-row")) {
    tr.classList.toggle("picked", tr.dataset.cgroup === target.cgroup);
  }
  const secs = Number(document.getElementById("flame-seconds").value) || 10;
  document.querySelector("#flame .notes").replaceChildren();
  flameState("sampling", `sampling ${target.what} for ${secs} s…`);
  try {
    const r = await fetch(`${BASE}api/v1/profile?format=json&seconds=${secs}&${target.query}`, {
      cache: "no-store",
    });
    if (r.status === 429) {
      const wait = r.headers.get("Retry-After");
      flameState("busy", `profiling is busy: ${(await r.text()).trim()}` +
        (wait ? ` (Retry-After: ${wait} s)` : ""));
      return;
    }
    if (!r.ok) {
      flameState("failed", `no profile (HTTP ${r.status}): ${(await r.text()).trim()}`);
      return;
    }
    const data = await r.json();
    document.querySelector("#flame .notes").replaceChildren(...data.notes.map((n) => {
      const li = document.createElement("li");
      li.textContent = n;
      return li;
    }));
    flameData = data;
    flameZoom = [data.root];
    const at = new Date().toLocaleTimeString();
    if (data.root.samples === 0) {
      flameState("empty", `no samples of ${target.what} in the ${data.seconds.toFixed(1)} s to ${at}` +
        ` (${data.event})`);
      document.querySelector("#flame .graph").replaceChildren();
      return;
    }
    const left = data.frames_left_out ? `; ${data.frames_left_out} colder frames left out` : "";
    flameState("drawn", `${target.what}: ${data.root.samples} samples of ${data.event} in the ` +
      `${data.seconds.toFixed(1)} s to ${at}${left}`);
    drawFlame();
  } catch (e) {
    flameState("failed", `no profile: ${e}`);
  } finally {
    flameBusy = false;
    flameButtons();
  }
}

// A frame's colour: kernel frames orange, user frames warm (by name),
// frames without a symbol grey.
function flameColour(node) {
  if (node.kind === "kernel") return "hsl(28, 85%, 62%)";
  if (node.kind === "unsymbolized") return "hsl(0, 0%, 75%)";
  if (node.kind === "root") return "hsl(210, 20%, 80%)";
  let h = 0;
  for (let i = 0; i < node.name.length; i++) h = (h * 31 + node.name.charCodeAt(i)) % 997;
  return `hsl(${5 + (h % 50)}, 75%, ${58 + (h % 12)}%)`;
}

function drawFlame() {
  const graph = document.querySelector("#flame .graph");
  const data = flameData;
  const width = Math.max(graph.clientWidth, 300);
  const value = (n) => (data.root.events > 0 ? n.events : n.samples);
  const top = flameZoom[flameZoom.length - 1];
  const total = value(top) || 1;
  const frames = [];
  // The zoomed frame's callers, full width above it.
  flameZoom.forEach((n, depth) => frames.push([n, depth, 0, width, depth < flameZoom.length - 1]));
  const walk = (n, depth, x, w) => {
    let cx = x;
    for (const c of n.children) {
      const cw = (w * value(c)) / (value(n) || 1);
      if (cw >= 0.5) {
        frames.push([c, depth + 1, cx, cw, false]);
        walk(c, depth + 1, cx, cw);
      }
      cx += cw;
    }
  };
  walk(top, flameZoom.length - 1, 0, width);
  const depth = Math.max(...frames.map((f) => f[1])) + 1;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(depth * FLAME_ROW));
  for (const [n, d, x, w, caller] of frames) {
    const g = document.createElementNS(SVG, "g");
    g.setAttribute("class", "frame");
    g.dataset.name = n.name;
    g.dataset.kind = n.kind;
    g.dataset.samples = String(n.samples);
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("x", x.toFixed(1));
    rect.setAttribute("y", String(d * FLAME_ROW));
    rect.setAttribute("width", Math.max(w, 0.5).toFixed(1));
    rect.setAttribute("height", String(FLAME_ROW - 1));
    rect.setAttribute("fill", caller ? "hsl(0, 0%, 88%)" : flameColour(n));
    const title = document.createElementNS(SVG, "title");
    const share = (100 * value(n)) / (value(data.root) || 1);
    title.textContent = `${n.name}: ${n.samples} samples, ${share.toFixed(2)}% of all` +
      (n.kind === "kernel" ? " (kernel)" : n.kind === "unsymbolized" ? " (no symbol)" : "");
    g.append(title, rect);
    const fits = Math.floor((w - 6) / 7);
    if (fits >= 3) {
      const text = document.createElementNS(SVG, "text");
      text.setAttribute("x", (x + 3).toFixed(1));
      text.setAttribute("y", String(d * FLAME_ROW + 12));
      text.textContent = n.name.length <= fits ? n.name : n.name.slice(0, fits - 1) + "…";
      g.append(text);
    }
    g.addEventListener("click", () => {
      // A caller (or the top) zooms out to it, a callee in.
      const at = flameZoom.indexOf(n);
      flameZoom = at >= 0 ? flameZoom.slice(0, at + 1) : flameZoom.concat(flamePath(top, n).slice(1));
      drawFlame();
    });
    svg.append(g);
  }
  graph.replaceChildren(svg);
}

// The frames from `from` down to `to` (both included).
function flamePath(from, to) {
  if (from === to) return [from];
  for (const c of from.children) {
    const p = flamePath(c, to);
    if (p) return [from, ...p];
  }
  return null;
}

document.querySelector("#cgroup-top tbody").addEventListener("click", (e) => {
  const btn = e.target.closest("button.profile");
  const tr = btn && btn.closest("tr");
  if (tr && tr.flameTarget && !flameBusy) takeProfile(tr.flameTarget);
});

document.querySelector("#heatmap select.pick").addEventListener("change", (e) => {
  heatPicked = e.target.value;
  if (lastFrame) showHeatmap(lastFrame);
});
let lastFrame = null;

function show(frame) {
  lastFrame = frame;
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
    lastFrame = frame;
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
  // A stream's frame has `unavailable` only when it changed (and in the
  // first frame of a connection): the others keep the last one.
  let unavailable = {};
  ws.onmessage = (e) => {
    const frame = JSON.parse(e.data);
    if (frame.unavailable) unavailable = frame.unavailable;
    else frame.unavailable = unavailable;
    show(frame);
  };
  ws.onclose = (e) => {
    document.getElementById("status").textContent =
      `stream closed (${e.code}${e.reason ? ": " + e.reason : ""}); reconnecting…`;
    setTimeout(connect, 2000);
  };
}
paintSnapshot();
connect();
