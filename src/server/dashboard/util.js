// DOM and number helpers. Every value from the server goes into the page as text (textContent) or as
// an attribute set through the DOM, never as HTML.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === 'text') e.textContent = String(v);
    else if (k === 'className') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function setText(node, value) {
  const text = value === null || value === undefined ? '' : String(value);
  if (node.textContent !== text) node.textContent = text;
}

export function bytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)} ${units[i]}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 0) return 'forever';
  const s = ms / 1000;
  if (s < 1) return `${Math.round(ms)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

export function seconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms`;
  return `${s.toFixed(2)} s`;
}

export function rate(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

// A stable colour per name (the same model keeps its colour in every bar).
export function colourOf(name) {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return `hsl(${h % 360}, 60%, 52%)`;
}

// The q-quantile of the requests between two cumulative histograms (Prometheus' histogram_quantile:
// linear within the bucket); null when none were answered.
export function quantile(q, before, after) {
  if (!after || !after.length) return null;
  const counts = after.map((b, i) => ({
    le: b.le === '+Inf' ? Infinity : b.le,
    n: b.count - (before && before[i] ? before[i].count : 0),
  }));
  const total = counts[counts.length - 1].n;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevN = 0;
  for (const { le, n } of counts) {
    if (n >= rank) {
      if (le === Infinity) return prevLe; // beyond the largest bound: report that bound
      return prevLe + (le - prevLe) * ((rank - prevN) / Math.max(n - prevN, 1e-9));
    }
    prevLe = le;
    prevN = n;
  }
  return prevLe;
}
