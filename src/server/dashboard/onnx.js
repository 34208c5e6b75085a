// Runs an ONNX model on .npy inputs: the model's inputs come from GET /v2/models/{name}; each .npy is
// parsed here (npy.js), checked against the input's shape and sent as KServe v2 JSON to
// /v2/models/{name}/infer. Outputs are shown as name, datatype, shape and first values.
import { apiJson } from './api.js';
import { parseNpy } from './npy.js';
import { el } from './util.js';

const $ = (id) => document.getElementById(id);
const INTEGER = new Set(['INT8', 'INT16', 'INT32', 'INT64', 'UINT8', 'UINT16', 'UINT32', 'UINT64']);
const FLOAT = new Set(['FP16', 'FP32', 'FP64', 'BF16']);

export class OnnxForm {
  constructor() {
    this.metadata = null;
    this.loadedFor = '';
    $('onnx-model').addEventListener('change', () => this.describe());
    $('onnx-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.run();
    });
  }

  setModels(models) {
    const select = $('onnx-model');
    const names = models.filter((m) => m.format === 'onnx').map((m) => m.name);
    const have = Array.from(select.options, (o) => o.value);
    if (have.join('\n') !== names.join('\n')) {
      const current = select.value;
      select.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
      if (names.includes(current)) select.value = current;
    }
    const ready = models.find((m) => m.name === select.value && m.state === 'ready');
    if (select.value && select.value !== this.loadedFor && ready) this.describe();
  }

  async describe() {
    const name = $('onnx-model').value;
    this.loadedFor = name;
    this.metadata = null;
    $('onnx-error').textContent = '';
    $('onnx-inputs').replaceChildren();
    if (!name) return;
    try {
      const md = await apiJson(`/v2/models/${encodeURIComponent(name)}`);
      if (this.loadedFor !== name) return;
      this.metadata = md;
      $('onnx-inputs').replaceChildren(
        ...md.inputs.map((input, i) =>
          el(
            'div',
            { className: 'onnx-input' },
            el('label', { for: `onnx-file-${i}`, text: `${input.name}  ${input.datatype} [${input.shape.join(', ')}]` }),
            el('input', { id: `onnx-file-${i}`, type: 'file', accept: '.npy', dataset: { input: input.name } }),
          ),
        ),
      );
    } catch (err) {
      this.loadedFor = '';
      $('onnx-error').textContent = `cannot read model '${name}': ${err.message}`;
    }
  }

  // The KServe input for `spec` from the parsed .npy `arr`, or an Error saying what does not fit.
  static toInput(spec, arr, fileName) {
    const where = `input '${spec.name}' (${fileName})`;
    if (spec.shape.length !== arr.shape.length) {
      throw new Error(`${where}: the model takes rank ${spec.shape.length} [${spec.shape.join(', ')}], the file has shape [${arr.shape.join(', ')}]`);
    }
    spec.shape.forEach((d, i) => {
      if (d >= 0 && d !== arr.shape[i]) {
        throw new Error(`${where}: dimension ${i} must be ${d} (model shape [${spec.shape.join(', ')}]), the file has [${arr.shape.join(', ')}]`);
      }
    });
    let data = arr.values;
    let datatype = arr.datatype;
    if (datatype !== spec.datatype) {
      // Numbers convert to the model's type when that loses nothing a user would expect to keep.
      const toFloat = FLOAT.has(spec.datatype) && (FLOAT.has(datatype) || INTEGER.has(datatype));
      const toInt = INTEGER.has(spec.datatype) && INTEGER.has(datatype);
      if (!toFloat && !toInt) {
        throw new Error(`${where}: the model takes ${spec.datatype}, the file holds ${datatype}`);
      }
      datatype = spec.datatype;
    }
    if (datatype === 'BOOL') data = data.map(Boolean);
    return { name: spec.name, shape: arr.shape, datatype, data };
  }

  async run() {
    const status = $('onnx-status');
    const error = $('onnx-error');
    error.textContent = '';
    $('onnx-output-table').hidden = true;
    $('onnx-outputs').replaceChildren();
    const name = $('onnx-model').value;
    if (!this.metadata || this.metadata.name !== name) {
      error.textContent = name ? `model '${name}' is not ready (load it first)` : 'no ONNX model is served';
      return;
    }
    const inputs = [];
    try {
      for (const spec of this.metadata.inputs) {
        const picker = Array.from(document.querySelectorAll('#onnx-inputs input[type=file]')).find(
          (f) => f.dataset.input === spec.name,
        );
        const file = picker && picker.files[0];
        if (!file) throw new Error(`choose a .npy file for input '${spec.name}'`);
        let arr;
        try {
          arr = parseNpy(await file.arrayBuffer());
        } catch (err) {
          throw new Error(`${file.name}: ${err.message}`);
        }
        inputs.push(OnnxForm.toInput(spec, arr, file.name));
      }
    } catch (err) {
      error.textContent = err.message;
      return;
    }
    status.textContent = 'running…';
    const t0 = performance.now();
    try {
      const result = await apiJson(`/v2/models/${encodeURIComponent(name)}/infer`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ inputs }),
      });
      status.textContent = `done in ${Math.round(performance.now() - t0)} ms`;
      $('onnx-outputs').replaceChildren(
        ...(result.outputs || []).map((o) => {
          const values = Array.isArray(o.data) ? o.data : [];
          const first = values
            .slice(0, 8)
            .map((v) => (typeof v === 'number' ? Number(v.toPrecision(5)) : v))
            .join(', ');
          return el(
            'tr',
            { dataset: { output: o.name, shape: (o.shape || []).join(',') } },
            el('td', { text: o.name }),
            el('td', { text: o.datatype }),
            el('td', { className: 'shape', text: `[${(o.shape || []).join(', ')}]` }),
            el('td', { className: 'mono', text: values.length > 8 ? `${first}, …` : first }),
          );
        }),
      );
      $('onnx-output-table').hidden = false;
    } catch (err) {
      status.textContent = '';
      error.textContent = err.message;
    }
  }
}
