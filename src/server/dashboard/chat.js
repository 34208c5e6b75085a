// The chat playground: POST /v1/chat/completions with stream:true, read as server-sent events from a
// ReadableStream, each token appended as text. Stop aborts the fetch; the server cancels a generation
// whose client went away.
import { api, errorMessage, AuthError } from './api.js';
import { el } from './util.js';

const $ = (id) => document.getElementById(id);

export class Chat {
  constructor() {
    this.messages = []; // the conversation sent with each request
    this.controller = null;
    $('chat-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.send();
    });
    $('chat-stop').addEventListener('click', () => this.stop());
    $('chat-clear').addEventListener('click', () => {
      this.messages = [];
      $('chat-log').replaceChildren();
      $('chat-status').textContent = '';
    });
    $('chat-input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        this.send();
      }
    });
  }

  // The models offered: GGUF ones (ready first), keeping the current choice.
  setModels(models) {
    const select = $('chat-model');
    const names = models.filter((m) => m.format === 'gguf').map((m) => m.name);
    const current = select.value;
    const have = Array.from(select.options, (o) => o.value);
    if (have.join('\n') === names.join('\n')) return;
    select.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
    if (names.includes(current)) select.value = current;
  }

  addMessage(role, text) {
    const textNode = el('span', { className: 'text', text });
    const node = el('div', { className: `msg ${role}` }, el('span', { className: 'who', text: role }), textNode);
    $('chat-log').append(node);
    $('chat-log').scrollTop = $('chat-log').scrollHeight;
    return { node, textNode };
  }

  settings() {
    const body = {};
    const num = (id, key, parse) => {
      const v = $(id).value.trim();
      if (v !== '') body[key] = parse(v);
    };
    num('chat-temperature', 'temperature', Number);
    num('chat-top-p', 'top_p', Number);
    num('chat-max-tokens', 'max_tokens', (v) => parseInt(v, 10));
    num('chat-seed', 'seed', (v) => parseInt(v, 10));
    return body;
  }

  setBusy(busy) {
    $('chat-send').disabled = busy;
    $('chat-stop').disabled = !busy;
    $('chat-form').dataset.state = busy ? 'streaming' : 'idle';
  }

  async send() {
    if (this.controller) return;
    const model = $('chat-model').value;
    const text = $('chat-input').value.trim();
    if (!model) {
      $('chat-status').textContent = 'no GGUF model is served';
      return;
    }
    if (!text) return;
    $('chat-input').value = '';
    this.messages.push({ role: 'user', content: text });
    this.addMessage('user', text);
    const out = this.addMessage('assistant', '');
    const controller = new AbortController();
    this.controller = controller;
    this.setBusy(true);
    const status = $('chat-status');
    status.textContent = 'waiting for the first token…';
    const started = performance.now();
    let firstAt = 0;
    let chunks = 0;
    let usageTokens = null;
    let reply = '';
    let finish = '';
    const showSpeed = (final) => {
      const tokens = usageTokens ?? chunks;
      const secs = firstAt ? (performance.now() - firstAt) / 1000 : 0;
      const tps = secs > 0 && tokens > 1 ? ((tokens - 1) / secs).toFixed(1) : '–';
      const ttft = firstAt ? `${Math.round(firstAt - started)} ms to first token, ` : '';
      status.textContent = `${final ? final + ': ' : ''}${tokens} tokens, ${ttft}${tps} tokens/s`;
    };
    try {
      const response = await api('/v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          model,
          messages: this.messages,
          stream: true,
          stream_options: { include_usage: true },
          ...this.settings(),
        }),
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`${response.status}: ${await errorMessage(response)}`);
      for await (const event of sseEvents(response.body)) {
        if (event === '[DONE]') break;
        let chunk;
        try {
          chunk = JSON.parse(event);
        } catch {
          throw new Error('the server sent an event that is not JSON');
        }
        if (chunk.error) throw new Error(chunk.error.message || String(chunk.error));
        if (chunk.usage && typeof chunk.usage.completion_tokens === 'number') {
          usageTokens = chunk.usage.completion_tokens;
        }
        const choice = chunk.choices && chunk.choices[0];
        if (!choice) continue;
        const delta = choice.delta && choice.delta.content;
        if (delta) {
          if (!firstAt) firstAt = performance.now();
          chunks++;
          reply += delta;
          out.textNode.textContent = reply; // text only: never parsed as HTML
          $('chat-log').scrollTop = $('chat-log').scrollHeight;
          showSpeed('');
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      this.messages.push({ role: 'assistant', content: reply });
      showSpeed(`done (${finish || 'end'})`);
      out.node.dataset.state = 'done';
    } catch (err) {
      if (controller.signal.aborted) {
        out.node.classList.add('stopped');
        out.node.dataset.state = 'stopped';
        if (reply) this.messages.push({ role: 'assistant', content: reply });
        showSpeed('stopped');
      } else {
        out.node.classList.add('error');
        out.node.dataset.state = 'error';
        out.textNode.textContent = reply || (err instanceof AuthError ? 'the API key was refused' : err.message);
        status.textContent = err.message;
        this.messages.pop(); // the user turn that failed is not resent
      }
    } finally {
      this.controller = null;
      this.setBusy(false);
    }
  }

  stop() {
    if (this.controller) this.controller.abort();
  }
}

// The data of each server-sent event of `stream` (a ReadableStream of bytes).
async function* sseEvents(stream) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      buffer = buffer.replace(/\r\n/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data) yield data;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
