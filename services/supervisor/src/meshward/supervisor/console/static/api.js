// The console's only way to the server: the public HTTP API, same origin, with the API key when one is set.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// A whole answer event carries the response (charts included as base64): bounded, not unlimited.
const MAX_EVENT_CHARS = 32_000_000;

const HINTS = {
  401: 'The server needs an API key: enter it above and save it.',
  403: 'The API key was refused: check it above.',
};

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  const error = body && typeof body === 'object' ? body.error : null;
  let message = (error && typeof error.message === 'string' && error.message)
    || (body && typeof body.detail === 'string' && body.detail)
    || `${response.status} ${response.statusText}`.trim();
  if (HINTS[response.status]) message = `${HINTS[response.status]} (${message})`;
  if (response.status === 429) {
    const after = response.headers.get('Retry-After');
    message = `Too many requests${after ? `: try again in ${after} s` : ''}. (${message})`;
  }
  const code = (error && typeof error.code === 'string' && error.code) || `http_${response.status}`;
  return new ApiError(response.status, code, message);
}

// fetch rejects with a TypeError when nothing answers (server down, network gone): say that in words.
async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', `The server cannot be reached (${e.message}): is meshward running?`);
  }
}

export class Api {
  constructor(apiKey) {
    this.apiKey = apiKey; // () => string
  }

  headers(extra = {}) {
    const headers = { Accept: 'application/json', ...extra };
    const key = this.apiKey();
    if (key) headers['X-Api-Key'] = key;
    return headers;
  }

  async json(method, path, body, { signal } = {}) {
    const init = { method, headers: this.headers(), signal, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const response = await send(path, init);
    if (!response.ok) throw await errorOf(response);
    return response.json();
  }

  // POST /v1/ask with "stream": true, yielding {event, data} as the server sends them.
  async *ask(body, { signal } = {}) {
    const response = await send('/v1/ask', {
      method: 'POST',
      headers: this.headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
      body: JSON.stringify({ ...body, stream: true }),
      signal,
      cache: 'no-store',
      credentials: 'omit',
    });
    if (!response.ok) throw await errorOf(response);
    if (!(response.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
      throw new ApiError(response.status, 'not_a_stream', 'the server answered without an event stream');
    }
    yield* serverSentEvents(response.body);
  }
}

// Server-Sent Events over a fetch body (EventSource cannot POST): blocks separated by a blank line,
// `event:` and `data:` fields, comments (`:` pings) ignored, CR LF and CR accepted as line ends.
export async function* serverSentEvents(stream) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let carry = ''; // a CR at the end of a chunk may be the first half of a CR LF
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      let text = carry + (value || '');
      carry = '';
      if (!done && text.endsWith('\r')) {
        carry = '\r';
        text = text.slice(0, -1);
      }
      buffer += text.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const parsed = parseBlock(block);
        if (parsed) yield parsed;
      }
      if (buffer.length > MAX_EVENT_CHARS) {
        throw new ApiError(0, 'event_too_large', 'an event from the server is larger than the console accepts');
      }
      if (done) break;
    }
    finished = true;
  } finally {
    // a consumer that stops early (or an error) closes the connection: the server then cancels the run
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function parseBlock(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  try {
    return { event, data: JSON.parse(data.join('\n')) };
  } catch {
    throw new ApiError(0, 'bad_event', `the server sent a ${event} event that is not JSON`);
  }
}
