// Gantry dashboard: polls GET /gantry/status every second and shows the machine, the models, the
// memory budgets and live figures; load/unload use the KServe repository routes, pin/unpin
// /gantry/models/{name}/pin|unpin. Every server value is written as text (textContent), never HTML.
import { api, apiJson, errorMessage, setApiKey, setAuthHandler, AuthError } from './api.js';
import { Chat } from './chat.js';
import { OnnxForm } from './onnx.js';
import { el, setText, bytes, duration, seconds, rate, colourOf, quantile } from './util.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
const RATE_WINDOW_S = 5; // requests/s and tokens/s: over the last 5 s
const LATENCY_WINDOW_S = 60; // percentiles: requests answered in the last minute
const STATES = new Set(['loading', 'ready', 'draining', 'unloaded', 'failed', 'evicted']);

let timer = null;
let waitingForKey = false;
const history = []; // {t (s), totals} per poll, newest last
const chat = new Chat();
const onnx = new OnnxForm();

// ---------------------------------------------------------------------------------------- key flow
setAuthHandler((hadKey) => {
  if (waitingForKey) return;
  waitingForKey = true;
  stopPolling();
  $('main').hidden = true;
  $('key-panel').hidden = false;
  $('key-error').textContent = hadKey ? 'The server refused that key; enter another.' : '';
  setConnection('API key needed', 'bad');
  $('key-input').focus();
});

$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const key = $('key-input').value.trim();
  if (!key) return;
  setApiKey(key);
  $('key-input').value = '';
  $('key-panel').hidden = true;
  waitingForKey = false;
  startPolling();
});

// ---------------------------------------------------------------------------------------- polling
function startPolling() {
  stopPolling();
  poll();
}
function stopPolling() {
  if (timer) clearTimeout(timer);
  timer = null;
}

async function poll() {
  try {
    const status = await apiJson('/gantry/status');
    $('main').hidden = false;
    setConnection('live', 'ok');
    render(status);
  } catch (err) {
    if (err instanceof AuthError) return; // the key form is up; polling resumes after it
    setConnection('server unreachable', 'bad');
    showBanner(`Cannot read /gantry/status: ${err.message}`);
  }
  if (!waitingForKey) timer = setTimeout(poll, POLL_MS);
}

function setConnection(text, kind) {
  const c = $('connection');
  setText(c, text);
  c.className = `pill ${kind}`;
}

function showBanner(text) {
  const b = $('banner');
  setText(b, text);
  b.hidden = !text;
}

// ---------------------------------------------------------------------------------------- rendering
function render(s) {
  setText($('version'), `v${s.server.version}`);
  renderMachine(s.machine);
  renderBudgets(s.budgets);
  renderModels(s.models);
  renderLive(s);
  chat.setModels(s.models);
  onnx.setModels(s.models);
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

function renderMachine(m) {
  const cpu = m.cpu;
  const rows = [
    ['CPU', `${cpu.model || cpu.vendor || 'unknown'} (${cpu.architecture})`],
    ['cores', `${cpu.physical_cores} physical, ${cpu.logical_cores} logical, ${cpu.sockets} socket(s)`],
    ['memory', `${bytes(m.host.memory_total_bytes)} total, ${bytes(m.host.memory_available_bytes)} available`],
  ];
  if (m.host.cpu_quota_cores !== null) rows.push(['CPU quota', `${m.host.cpu_quota_cores} cores`]);
  if (m.host.memory_limit_bytes !== null) rows.push(['memory limit', bytes(m.host.memory_limit_bytes)]);
  const env = [m.environment.container, m.environment.orchestrator, m.environment.cloud, (m.environment.dmi || {}).product_name]
    .filter(Boolean)
    .join(', ');
  if (env || m.environment.virtualized) rows.push(['environment', `${env}${m.environment.virtualized ? ' (virtualized)' : ''}`]);
  if (cpu.isa && cpu.isa.length) rows.push(['ISA', cpu.isa.join(' ')]);
  if (m.warnings && m.warnings.length) rows.push(['warnings', m.warnings.join('; ')]);
  const key = JSON.stringify(rows) + JSON.stringify(m.devices);
  if ($('machine').dataset.key === key) return;
  $('machine').dataset.key = key;
  $('machine-summary').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
  $('device-rows').replaceChildren(
    ...m.devices.map((d) =>
      el(
        'tr',
        {},
        el('td', { className: 'mono', text: d.id }),
        el('td', { text: d.kind }),
        el('td', {
          text: d.name.toLowerCase().includes(d.vendor.toLowerCase()) ? d.name : [d.vendor, d.name].filter(Boolean).join(' '),
        }),
        el('td', {
          text:
            d.memory_total_bytes === null
              ? '–'
              : `${bytes(d.memory_total_bytes)}${d.memory_free_bytes !== null ? `, ${bytes(d.memory_free_bytes)} free` : ''}`,
        }),
      ),
    ),
  );
}

function renderBudgets(budgets) {
  const box = $('budgets');
  if (!budgets.length) {
    box.replaceChildren(el('p', { className: 'muted', text: 'No device has a memory budget.' }));
    return;
  }
  const key = JSON.stringify(budgets);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(
    ...budgets.map((b) => {
      const owners = b.owners.filter((o) => o.bytes > 0);
      // Two bars: the budget's capacity (what is taken, by model), and the memory in use split by model
      // (readable even when the models are small next to the budget).
      const capacity = el('div', { className: 'bar thin', role: 'img', 'aria-label': `${b.device}: share of the budget` });
      const split = el('div', { className: 'bar', role: 'img', 'aria-label': `${b.device}: memory in use by model` });
      const legend = el('div', { className: 'legend' });
      const total = owners.reduce((a, o) => a + o.bytes, 0);
      for (const o of owners) {
        const title = `${o.owner}: ${bytes(o.bytes)}${o.pinned ? ' (pinned)' : ''}`;
        // Widths through the CSSOM, not a style attribute: allowed by style-src 'self'.
        const part = el('div', { className: 'segment', title, dataset: { owner: o.owner } });
        part.style.width = `${b.capacity ? Math.min(100, (100 * o.bytes) / b.capacity) : 0}%`;
        part.style.background = colourOf(o.owner);
        capacity.append(part);
        const seg = el('div', { className: 'segment', title, dataset: { owner: o.owner } });
        seg.style.width = `${(100 * o.bytes) / total}%`;
        seg.style.background = colourOf(o.owner);
        if ((100 * o.bytes) / total > 12) seg.append(el('span', { className: 'segment-label', text: o.owner }));
        split.append(seg);
        const sw = el('span', { className: 'swatch' });
        sw.style.background = colourOf(o.owner);
        legend.append(el('span', {}, sw, `${o.owner} ${bytes(o.bytes)}${o.pinned ? ' (pinned)' : ''}`));
      }
      const pct = b.capacity ? ((100 * b.used) / b.capacity).toFixed(b.used / b.capacity < 0.01 ? 2 : 0) : '0';
      return el(
        'div',
        { className: 'budget', dataset: { device: b.device } },
        el(
          'div',
          { className: 'budget-head' },
          el('span', { className: 'mono', text: b.device }),
          el('span', { text: `${bytes(b.used)} of ${bytes(b.capacity)} used (${pct} %, peak ${bytes(b.peak)})` }),
        ),
        capacity,
        owners.length ? split : el('p', { className: 'muted small', text: 'nothing loaded' }),
        legend,
      );
    }),
  );
}

// Rows are kept per model (not rebuilt) so a button stays under the pointer while it is clicked.
const rows = new Map();

function modelRow(name) {
  let r = rows.get(name);
  if (r) return r;
  const cells = {};
  const td = (key, className) => (cells[key] = el('td', { className }));
  const tr = el(
    'tr',
    { dataset: { model: name } },
    el('td', { className: 'mono', text: name }),
    td('state', 'state-cell'),
    td('format'),
    td('backend'),
    td('provider'),
    td('memory', 'mono'),
    td('pinned'),
    td('keepAlive'),
    td('idle'),
    td('queue'),
    td('actions', 'actions'),
  );
  const badge = el('span', { className: 'state' });
  const reason = el('span', { className: 'reason' });
  cells.state.append(badge, reason);
  const path = `/v2/repository/models/${encodeURIComponent(name)}`;
  const gpath = `/gantry/models/${encodeURIComponent(name)}`;
  const load = el('button', { type: 'button', className: 'secondary', dataset: { action: 'load' }, text: 'Load' });
  const unload = el('button', { type: 'button', className: 'secondary', dataset: { action: 'unload' }, text: 'Unload' });
  const pin = el('button', { type: 'button', className: 'secondary', dataset: { action: 'pin' }, text: 'Pin' });
  load.addEventListener('click', () => act(load, `${path}/load`, `load '${name}'`));
  unload.addEventListener('click', () => act(unload, `${path}/unload`, `unload '${name}'`));
  pin.addEventListener('click', () => act(pin, `${gpath}/${pin.dataset.pinned === 'true' ? 'unpin' : 'pin'}`, `pin '${name}'`));
  cells.actions.append(load, unload, pin);
  r = { tr, cells, badge, reason, load, unload, pin, busy: false };
  rows.set(name, r);
  return r;
}

function renderModels(models) {
  const body = $('model-rows');
  const seen = new Set();
  models.forEach((m, i) => {
    const r = modelRow(m.name);
    seen.add(m.name);
    if (body.children[i] !== r.tr) body.insertBefore(r.tr, body.children[i] || null);
    const state = STATES.has(m.state) ? m.state : 'unknown';
    r.tr.dataset.state = state;
    r.tr.dataset.pinned = String(Boolean(m.pinned));
    setText(r.badge, state);
    r.badge.className = `state state-${state}`;
    setText(r.reason, state === 'ready' ? '' : m.reason);
    setText(r.cells.format, m.format || '?');
    setText(r.cells.backend, m.backend || '–');
    setText(r.cells.provider, m.provider || '–');
    const mem = Object.entries(m.memory || {});
    setText(r.cells.memory, mem.length ? mem.map(([d, b]) => `${d} ${bytes(b)}`).join(', ') : '–');
    setText(r.cells.pinned, m.pinned ? 'yes' : 'no');
    setText(r.cells.keepAlive, m.keep_alive_ms === null ? '–' : duration(m.keep_alive_ms));
    setText(r.cells.idle, m.state === 'ready' && m.idle_ms !== null ? duration(m.idle_ms) : '–');
    setText(r.cells.queue, m.queue_depth);
    r.pin.dataset.pinned = String(Boolean(m.pinned));
    setText(r.pin, m.pinned ? 'Unpin' : 'Pin');
    if (!r.busy) {
      r.load.disabled = state === 'ready' || state === 'loading' || state === 'draining' || !m.in_repository;
      r.unload.disabled = state !== 'ready';
      r.pin.disabled = state !== 'ready';
    }
  });
  for (const [name, r] of rows) {
    if (!seen.has(name)) {
      r.tr.remove();
      rows.delete(name);
    }
  }
}

async function act(button, path, what) {
  const r = [...rows.values()].find((x) => x.cells.actions.contains(button));
  if (r) {
    r.busy = true;
    r.load.disabled = r.unload.disabled = r.pin.disabled = true;
  }
  showBanner('');
  try {
    const response = await api(path, { method: 'POST' });
    if (!response.ok) showBanner(`Could not ${what}: ${await errorMessage(response)}`);
  } catch (err) {
    if (!(err instanceof AuthError)) showBanner(`Could not ${what}: ${err.message}`);
  } finally {
    if (r) r.busy = false;
  }
  if (!waitingForKey) startPolling(); // show the new state now
}

// ---------------------------------------------------------------------------------------- live figures
// Rates and percentiles come from the server's cumulative totals (the same counters /metrics exports:
// gantry_requests_total, gantry_generated_tokens_total, gantry_request_duration_seconds), as the
// difference between this poll and one RATE_WINDOW_S / LATENCY_WINDOW_S ago.
function renderLive(s) {
  const now = performance.now() / 1000;
  history.push({ t: now, totals: s.totals });
  while (history.length > 2 && now - history[0].t > LATENCY_WINDOW_S) history.shift();
  const last = history[history.length - 1];
  const base = history.find((h) => now - h.t <= RATE_WINDOW_S + 0.5) || last;
  const dt = last.t - base.t;
  setText($('stat-queue'), s.gauges.queue_depth);
  setText($('stat-inflight'), s.gauges.inflight_requests);
  setText($('stat-requests'), s.totals.requests);
  setText($('stat-errors'), s.totals.errors);
  if (dt > 0.5) {
    setText($('stat-rps'), rate((last.totals.requests - base.totals.requests) / dt));
    setText($('stat-tps'), rate((last.totals.generated_tokens - base.totals.generated_tokens) / dt));
  }
  const first = history[0];
  for (const q of [50, 95, 99]) {
    setText($(`stat-p${q}`), seconds(quantile(q / 100, first.totals.latency_buckets, last.totals.latency_buckets)));
  }
}

startPolling();
