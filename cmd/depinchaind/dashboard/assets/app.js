// depinchain dashboard: hash routes, each page polls the dashboard's JSON API
// and redraws its tables in place; the loss chart is updated, not rebuilt.
"use strict";
let cfg = { poll_ms: 2000 };
let timer = null;
let chart = null;
let route = "";

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const short = (a) => (a && a.length > 20 ? a.slice(0, 12) + "…" + a.slice(-6) : a || "-");
const provLink = (a) => (a ? `<a href="#/provider/${esc(a)}" title="${esc(a)}">${esc(short(a))}</a>` : "-");
const strip = (s, p) => String(s || "").replace(p, "");
const dur = (sec) => {
  if (!sec) return "-";
  const h = Math.floor(sec / 3600), m = Math.floor((sec % 3600) / 60), s = Math.floor(sec % 60);
  return h ? `${h}h${m}m` : m ? `${m}m${s}s` : `${s}s`;
};
function table(id, head, rows, empty) {
  if (!rows.length) return `<div class="empty" id="${id}">${esc(empty)}</div>`;
  return `<table id="${id}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}
// api fetches from the dashboard's API; an answer for a page the user has
// left in the meantime is dropped (it throws Stale) rather than drawn.
class Stale extends Error {}
async function api(path) {
  const h = location.hash;
  const r = await fetch("api/" + path, { cache: "no-store" });
  const body = await r.json();
  if (location.hash !== h) throw new Stale("left the page");
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function setLive(ok, msg) {
  const el = document.getElementById("live");
  el.className = ok ? "" : "stale";
  el.textContent = ok ? "live · " + new Date().toLocaleTimeString() : "stale: " + msg;
}

async function jobsPage(q) {
  const owner = q.get("owner") || "", state = q.get("state") || "";
  const states = ["", "JOB_STATE_OPEN", "JOB_STATE_LEASED", "JOB_STATE_COMPLETED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"];
  const view = document.getElementById("view");
  if (!document.getElementById("jobs-filter")) {
    view.innerHTML = `<h1>Jobs</h1><form class="filters" id="jobs-filter">owner <input name="owner" size="46" value="${esc(owner)}">
      state <select name="state">${states.map((s) => `<option ${s === state ? "selected" : ""} value="${s}">${s ? strip(s, "JOB_STATE_") : "any"}</option>`).join("")}</select>
      <button>Filter</button></form><div id="jobs-body"></div>`;
    document.getElementById("jobs-filter").onsubmit = (e) => {
      e.preventDefault();
      const f = new FormData(e.target);
      location.hash = "#/jobs?" + new URLSearchParams({ owner: f.get("owner"), state: f.get("state") });
    };
  }
  const jobs = await api("jobs?" + new URLSearchParams({ owner, state }));
  document.getElementById("jobs-body").innerHTML = table("jobs", ["Job", "Name", "State", "Kind", "Workers", "Step", "Deposited", "Owner"],
    jobs.map((j) => `<tr data-job="${j.id}"><td><a href="#/job/${j.id}">${j.id}</a></td><td>${esc(j.name)}</td>
      <td class="state-${esc(j.state)}">${esc(strip(j.state, "JOB_STATE_"))}</td><td>${esc(strip(j.kind, "WORKLOAD_KIND_"))}</td>
      <td>${j.workers}</td><td>${j.step}/${j.total_steps}</td><td>${esc(j.deposited)}</td><td title="${esc(j.owner)}">${esc(short(j.owner))}</td></tr>`),
    "No jobs yet.");
}

function lossChart(points) {
  const byWorker = {};
  for (const p of points) (byWorker[p.worker] ||= []).push(p);
  const datasets = Object.keys(byWorker).map((w, i) => ({
    label: `worker ${w}`,
    data: byWorker[w].map((p) => ({ x: p.step, y: p.nats, source: p.source })),
    borderColor: ["#3b7ddd", "#11803a", "#b05a00", "#7a3bdd"][i % 4],
    pointBackgroundColor: byWorker[w].map((p) => (p.source === "verified" ? "#11803a" : "#b05a00")),
    pointStyle: byWorker[w].map((p) => (p.source === "verified" ? "circle" : "triangle")),
    pointRadius: 5,
  }));
  if (chart) {
    chart.data.datasets = datasets;
    chart.update("none");
    return;
  }
  chart = new Chart(document.getElementById("loss"), {
    type: "line",
    data: { datasets },
    options: {
      animation: false, maintainAspectRatio: false, parsing: true,
      scales: { x: { type: "linear", title: { display: true, text: "step" } }, y: { title: { display: true, text: "loss (nats)" } } },
      plugins: { tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.parsed.y.toFixed(4)} nats at step ${c.parsed.x} (${c.raw.source})` } } },
    },
  });
}

async function jobPage(id) {
  const view = document.getElementById("view");
  if (!document.getElementById("job-" + id)) {
    chart = null;
    view.innerHTML = `<div id="job-${id}"><h1 id="job-title">Job ${esc(id)}</h1><div id="job-top"></div>
      <h2>Loss curve</h2><div class="chart"><canvas id="loss"></canvas></div><div id="loss-note"></div><div id="job-rest"></div></div>`;
  }
  const v = await api("jobs/" + id);
  document.getElementById("job-title").innerHTML = `Job ${v.id} <small>${esc(v.name)}</small> · <span class="state-${esc(v.state)}" id="job-state">${esc(strip(v.state, "JOB_STATE_"))}</span>`;
  const m = v.money;
  const card = (k, val) => `<div class="card" data-money="${k}">${k}<b>${esc(val)} ${esc(m.denom)}</b></div>`;
  document.getElementById("job-top").innerHTML = `
    <div>owner ${esc(v.owner)} · ${esc(strip(v.kind, "WORKLOAD_KIND_"))} · ${v.total_steps} steps, a checkpoint every ${v.checkpoint_interval}
    ${v.close_reason ? `· <span class="${v.state === "JOB_STATE_FAILED" ? "bad" : ""}" id="close-reason">${esc(v.close_reason)}</span>` : ""}</div>
    <h2>Money</h2><div class="cards">${card("deposited", m.deposited)}${card("escrowed", m.escrowed)}${card("pending", m.pending)}${card("paid", m.paid)}${card("audit fees", m.audit_fees)}${card("refunded", m.refunded)}</div>
    <h2>Workers</h2>` + table("workers", ["Worker", "Progress", "Steps", "Rate", "Checkpointed / committed", "ETA", "Next checkpoint by", "Lease", "Provider", "Latest loss"],
    v.workers.map((w) => `<tr data-worker="${w.worker}"><td>${w.worker}</td>
      <td><span class="bar"><div style="width:${w.total ? Math.min(100, (100 * w.step) / w.total) : 0}%"></div></span></td>
      <td class="steps">${w.step}/${w.total}</td><td>${w.steps_per_hour ? w.steps_per_hour.toFixed(0) + " steps/h" : "-"}</td>
      <td class="rate-vs-committed">${w.committed_steps_per_hour ? `${(w.checkpointed_steps_per_hour || 0).toFixed(0)} / ${w.committed_steps_per_hour} steps/h` : "-"}</td>
      <td>${w.step >= w.total ? "done" : dur(w.eta_seconds)}</td><td>${w.checkpoint_deadline ? "height " + w.checkpoint_deadline : "-"}</td>
      <td>${w.lease_id || "-"}</td><td>${provLink(w.provider)}</td>
      <td>${w.latest_loss ? `${w.latest_loss.nats.toFixed(4)} <span class="${w.latest_loss.source === "verified" ? "verified" : "self"}">${w.latest_loss.source}</span>` : "-"}</td></tr>`),
    "No workers.");
  lossChart(v.loss);
  const verified = v.loss.filter((p) => p.source === "verified").length;
  document.getElementById("loss-note").innerHTML = `<span id="loss-count" data-points="${v.loss.length}" data-verified="${verified}">${v.loss.length} points: ${verified} <span class="verified">verified</span>, ${v.loss.length - verified} <span class="self">self-reported</span></span>`;
  const rest = cfg.rest_addr ? (p) => ` <a href="${esc(cfg.rest_addr)}${p}">REST</a>` : () => "";
  const bidNote = v.bidding_deadline ? `<div id="auction">auction open: closes at the end of height ${v.bidding_deadline}; bids ranked by price per step, cheapest first</div>` : "";
  document.getElementById("job-rest").innerHTML =
    `<h2>Bids</h2>${bidNote}` + table("bids", ["Provider", "Price/GPU-hour", "GPUs", "Committed rate", "Price/step", "Runtime", "Bid at", "Status"],
      v.bids.map((b) => `<tr data-bid="${esc(b.status)}:${esc(b.provider)}${b.lease_id ? ":" + b.lease_id : ""}" class="bid-${esc(b.status)}"><td>${provLink(b.provider)}</td>
        <td>${esc(b.price_per_gpu_hour)}</td><td>${b.gpus}</td><td class="bid-rate">${b.steps_per_hour} steps/h</td><td class="bid-price-per-step">${esc(b.price_per_step) || "-"}</td>
        <td>${esc(b.runtime) || "-"}</td><td>${b.status === "won" ? "leased at " : ""}height ${b.created_height}</td>
        <td class="bid-status">${b.status === "won" ? `won: lease ${b.lease_id} (worker ${b.worker})` : "open"}</td></tr>`),
      v.state === "JOB_STATE_OPEN" ? "No bid yet." : "No bids: x/market keeps bids only while the auction is open.") +
    `<h2>Checkpoints</h2>` + table("checkpoints", ["Lease/index", "Worker", "Steps", "Status", "Challengeable until", "Claim", "Loss", "Source", "Provider"],
      v.checkpoints.map((c) => `<tr data-checkpoint="${c.lease_id}/${c.index}"><td>${c.lease_id}/${c.index}${rest(`/depinchain/verify/v1/leases/${c.lease_id}/checkpoints/${c.index}`)}</td>
        <td>${c.worker}</td><td>${c.start_step}–${c.end_step}</td><td class="${c.final ? "verified" : ""}">${esc(strip(c.status, "CHECKPOINT_STATUS_"))}</td>
        <td>height ${c.challenge_deadline}</td><td>${esc(c.claim)}</td><td>${c.loss ? c.loss.nats.toFixed(4) : "-"}</td>
        <td>${c.loss ? `<span class="${c.loss.source === "verified" ? "verified" : "self"}">${c.loss.source}</span>` : "-"}${c.loss_error ? ` <span title="${esc(c.loss_error)}">(why not verified?)</span>` : ""}</td>
        <td>${provLink(c.provider)}</td></tr>`), "No checkpoint yet.") +
    (v.custody ? custodyTable(v.custody) : "") +
    (v.sync ? roundsTable(v.sync, v.rounds || []) : "") +
    `<h2>Disputes</h2>` + table("disputes", ["Challenge", "Checkpoint", "Phase", "To move", "Rounds", "Range", "Deadline", "Challenger", "Reason"],
      v.disputes.map((d) => `<tr data-dispute="${d.id}"><td>${d.id}</td><td>${d.lease_id}/${d.checkpoint}</td><td>${esc(strip(d.phase, /^(GAME_TURN_|CHALLENGE_OUTCOME_)/))}</td>
        <td class="to-move">${d.to_move ? `${esc(d.to_move)} ${esc(short(d.to_move === "provider" ? d.provider : d.challenger))}` : "-"}</td><td>${d.rounds}</td><td>${d.lo}–${d.hi}</td><td>${d.outcome ? "-" : "height " + d.deadline}</td><td>${esc(short(d.challenger))}</td><td>${esc(d.reason)}</td></tr>`), "No disputes.") +
    `<h2>Leases</h2>` + table("leases", ["Lease", "Worker", "Provider", "State", "From step", "Started", "Price/GPU-hour", "GPUs", "Paid", "Pending", "Closed"],
      v.leases.map((l) => `<tr data-lease="${l.id}"><td>${l.id}</td><td>${l.worker}</td><td>${provLink(l.provider)}</td><td>${esc(strip(l.state, "LEASE_STATE_"))}</td>
        <td>${l.resume_step}</td><td>height ${l.start_height}</td><td>${esc(l.price_per_gpu_hour)}</td><td>${l.gpus}</td><td>${esc(l.paid)}</td><td>${esc(l.pending)}</td>
        <td>${esc(strip(l.close_reason, "LEASE_CLOSE_REASON_")) || "-"}</td></tr>`), "No lease yet.");
}

// custodyTable: who holds each checkpoint's state pieces, and whether the
// checkpoint's finality waits on them (it needs k of the k+m pieces proven).
function custodyTable(custody) {
  const finality = (c) => c.final ? `<span class="verified">final</span>`
    : c.waits_on_custody ? `<span class="self">waits on custody: ${c.needed - c.proven} more proven piece${c.needed - c.proven === 1 ? "" : "s"} (withheld if short at height ${c.custody_deadline})</span>`
    : "not final; custody enough";
  return `<h2>Custody</h2>` + table("custody", ["Lease/index", "Object", "Pieces proven", "Rebuildable", "Finality", "Holders"],
    custody.map((c) => `<tr data-custody="${c.lease_id}/${c.index}" data-proven="${c.proven}" data-pieces="${c.pieces}" data-needed="${c.needed}" data-final="${c.final}" data-waits="${c.waits_on_custody}">
      <td>${c.lease_id}/${c.index}</td><td><code>${esc(c.object)}</code></td>
      <td class="pieces-proven"><span class="bar pieces"><div style="width:${c.pieces ? (100 * c.proven) / c.pieces : 0}%"></div></span> ${c.proven} of ${c.pieces} (k=${c.needed}, m=${c.pieces - c.needed})</td>
      <td class="${c.proven >= c.needed ? "verified" : "bad"}">${c.proven >= c.needed ? "yes" : `no (needs ${c.needed})`}</td>
      <td class="custody-finality">${finality(c)}</td>
      <td class="holders">${c.holders.length ? c.holders.map(provLink).join(" ") : "-"}</td></tr>`), "No checkpoint in custody yet.");
}

// roundsTable: a sync job's rounds (who entered, missed, was excluded; the next global
// and when it may be final), then every round's commits and what became of their claims.
function roundsTable(y, rounds) {
  const slots = (ws) => (ws.length ? ws.join(",") : "-");
  const height = (h) => (h ? "height " + h : "-");
  const excluded = (r) => r.commits.filter((c) => c.excluded).map((c) => `${c.worker} <span class="bad">(${esc(c.excluded_reason)})</span>`).join(" ") || "-";
  const pay = { paid: "verified", returned: "bad", pending: "" };
  return `<h2>Rounds</h2><div id="sync">every ${y.every} steps · outer lr ${y.outer_lr} · outer momentum ${y.outer_momentum} · top_k ${y.top_k} · round ${y.round} of ${y.total_rounds}</div>` +
    table("rounds", ["Round", "State", "Opened", "Deadline", "Entered", "Missed", "Excluded", "Aggregator", "Next global", "Final after"],
      rounds.map((r) => `<tr data-round="${r.round}" data-state="${esc(r.state)}"><td>${r.round}</td><td class="${r.state === "FINAL" ? "verified" : ""}">${esc(r.state)}</td>
        <td>height ${r.opened_height}</td><td>${height(r.deadline)}</td><td class="entered">${slots(r.entered)}</td><td class="missed">${slots(r.missed)}</td>
        <td class="excluded">${excluded(r)}</td><td>${provLink(r.aggregator)}</td><td><code>${esc(r.next_global_root) || "-"}</code></td><td>${height(r.challenge_deadline)}</td></tr>`), "No round yet.") +
    table("round-commits", ["Round", "Worker", "Lease", "Provider", "Committed at", "Claim", "Pay"],
      rounds.flatMap((r) => r.commits.map((c) => `<tr data-round-commit="${r.round}/${c.worker}"><td>${r.round}</td><td>${c.worker}</td><td>${c.lease_id}</td>
        <td>${provLink(c.provider)}</td><td>height ${c.committed_height}</td><td>${esc(c.claim)}</td><td class="pay ${pay[c.pay] || ""}">${esc(c.pay)}</td></tr>`)), "No commit yet.");
}

async function providerPage(op) {
  const p = await api("providers/" + encodeURIComponent(op));
  document.getElementById("view").innerHTML = `<h1 id="provider-title">Provider ${esc(p.moniker || "")} <small>${esc(p.operator)}</small></h1>
    <div>${esc(strip(p.status, "PROVIDER_STATUS_"))} · ${esc(p.region || "-")} · endpoint ${esc(p.endpoint)} · registered at height ${p.registered_height}</div>
    <div class="cards" style="margin-top:.6em"><div class="card" data-provider="bond">bond<b>${esc(p.bond)}</b></div>
    <div class="card" data-provider="locked">collateral locked<b>${esc(p.collateral_locked)}</b></div>
    <div class="card" data-provider="reputation">reputation<b>${p.leases_completed} completed · ${p.leases_failed} failed</b></div>
    <div class="card" data-provider="slashes">slashes<b>${p.slashes}</b></div></div>
    <h2>GPUs</h2>` + table("gpus", ["Model", "VRAM (MiB)", "Count"], p.gpus.map((g) => `<tr><td>${esc(g.model)}</td><td>${g.vram_mib}</td><td>${g.count}</td></tr>`), "No GPUs registered.") +
    `<h2>Active leases</h2>` + table("provider-leases", ["Lease", "Worker", "Price/GPU-hour", "GPUs", "Collateral", "Paid"],
      p.active_leases.map((l) => `<tr><td>${l.id}</td><td>${l.worker}</td><td>${esc(l.price_per_gpu_hour)}</td><td>${l.gpus}</td><td>${esc(l.collateral)}</td><td>${esc(l.paid)}</td></tr>`), "No active lease.") +
    `<h2>Collateral locks</h2>` + table("locks", ["For", "Amount"], p.locks.map((l) => `<tr><td>${esc(l.ref)}</td><td>${esc(l.amount)}</td></tr>`), "Nothing locked.");
}

async function networkPage() {
  const n = await api("network");
  document.getElementById("view").innerHTML = `<h1>Network</h1><div class="cards">
    <div class="card" data-network="open">open jobs<b>${n.open_jobs.length}</b></div>
    <div class="card" data-network="leases">active leases<b>${n.active_leases.length}</b></div>
    <div class="card" data-network="providers">providers<b>${n.providers.length}</b></div>
    <div class="card" data-network="gpus">GPUs offered<b>${n.gpus_by_model.reduce((a, g) => a + g.count, 0)}</b></div></div>
    <h2>GPUs offered by model</h2>` + table("gpus-by-model", ["Model", "VRAM (MiB)", "Count"], n.gpus_by_model.map((g) => `<tr><td>${esc(g.model)}</td><td>${g.vram_mib}</td><td>${g.count}</td></tr>`), "No GPUs offered.") +
    `<h2>Providers</h2>` + table("providers", ["Operator", "Moniker", "Status", "GPUs", "Bond"],
      n.providers.map((p) => `<tr><td>${provLink(p.operator)}</td><td>${esc(p.moniker)}</td><td>${esc(strip(p.status, "PROVIDER_STATUS_"))}</td><td>${p.gpus}</td><td>${esc(p.bond)}</td></tr>`), "No providers.") +
    `<h2>Open jobs</h2>` + table("open-jobs", ["Job", "Name", "Workers", "Deposited"], n.open_jobs.map((j) => `<tr><td><a href="#/job/${j.id}">${j.id}</a></td><td>${esc(j.name)}</td><td>${j.workers}</td><td>${esc(j.deposited)}</td></tr>`), "No open jobs.") +
    `<h2>Active leases</h2>` + table("active-leases", ["Lease", "Worker", "Provider", "From step", "Price/GPU-hour"],
      n.active_leases.map((l) => `<tr><td>${l.id}</td><td>${l.worker}</td><td>${provLink(l.provider)}</td><td>${l.resume_step}</td><td>${esc(l.price_per_gpu_hour)}</td></tr>`), "No active leases.") +
    `<h2>Recent disputes</h2>` + table("recent-disputes", ["Challenge", "Lease/checkpoint", "Phase", "Rounds", "Range"],
      n.recent_disputes.map((d) => `<tr><td>${d.id}</td><td>${d.lease_id}/${d.checkpoint}</td><td>${esc(strip(d.phase, /^(GAME_TURN_|CHALLENGE_OUTCOME_)/))}</td><td>${d.rounds}</td><td>${d.lo}–${d.hi}</td></tr>`), "No disputes.");
}

async function refresh() {
  const h = location.hash || "#/jobs";
  const [path, qs] = h.slice(2).split("?");
  const parts = path.split("/");
  try {
    if (parts[0] === "job") await jobPage(parts[1]);
    else if (parts[0] === "provider") await providerPage(decodeURIComponent(parts[1]));
    else if (parts[0] === "network") await networkPage();
    else await jobsPage(new URLSearchParams(qs || ""));
    setLive(true);
  } catch (e) {
    if (e instanceof Stale) return;
    setLive(false, e.message);
    if (route !== h) document.getElementById("view").innerHTML = `<p class="error" id="error">${esc(e.message)}</p>`;
  }
  route = h;
}

// One polling loop at a time: a loop started by a route change retires
// the one before it.
let loop = 0;
function schedule() {
  const mine = ++loop;
  clearTimeout(timer);
  const next = () => {
    refresh().finally(() => {
      if (mine === loop) timer = setTimeout(next, cfg.poll_ms);
    });
  };
  next();
}

window.addEventListener("hashchange", () => {
  document.getElementById("view").innerHTML = "";
  chart = null;
  schedule();
});
api("config").then((c) => {
  cfg = c;
  document.getElementById("chain").textContent = c.chain_id || "";
}).catch(() => {}).finally(schedule);
