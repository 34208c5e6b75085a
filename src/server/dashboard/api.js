// Requests to the server with the API key. The key is asked for once, on the first 401, with the
// page's own form (never prompt()), kept in this tab's sessionStorage and sent as a Bearer header,
// never in a URL.
const KEY_NAME = 'gantry.apiKey';

export class AuthError extends Error {
  constructor() {
    super('the server needs an API key');
  }
}

let onAuthNeeded = () => {};
export function setAuthHandler(fn) {
  onAuthNeeded = fn;
}

export function apiKey() {
  return sessionStorage.getItem(KEY_NAME) || '';
}
export function setApiKey(key) {
  sessionStorage.setItem(KEY_NAME, key);
}
export function forgetApiKey() {
  sessionStorage.removeItem(KEY_NAME);
}

// fetch() with the key; a 401 forgets a wrong key, asks for one and throws AuthError.
export async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  const key = apiKey();
  if (key) headers.set('Authorization', 'Bearer ' + key);
  const response = await fetch(path, { ...options, headers, cache: 'no-store', credentials: 'omit' });
  if (response.status === 401) {
    const hadKey = key !== '';
    forgetApiKey();
    onAuthNeeded(hadKey);
    throw new AuthError();
  }
  return response;
}

// The message of an error answer, whichever protocol's shape it has.
export async function errorMessage(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (typeof body.error === 'string') return body.error;
    if (body.error && typeof body.error.message === 'string') return body.error.message;
  } catch {
    // not JSON: the text itself
  }
  return text || `HTTP ${response.status}`;
}

// JSON from `path`, or an Error carrying the server's message.
export async function apiJson(path, options = {}) {
  const response = await api(path, options);
  if (!response.ok) throw new Error(`${response.status}: ${await errorMessage(response)}`);
  return response.json();
}
