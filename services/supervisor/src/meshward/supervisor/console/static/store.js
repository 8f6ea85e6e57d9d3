// What the console remembers in this browser: the thread list and the API key (localStorage), each read
// back defensively (another version of the page, or a person, may have written anything there).

const THREADS_KEY = 'meshward.console.threads.v1';
const API_KEY_KEY = 'meshward.console.apiKey';
export const THREAD_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_THREADS = 100;
const MAX_TITLE_CHARS = 120;

const memory = new Map(); // when localStorage is unavailable (disabled, private mode quota)

function read(key) {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return memory.get(key) ?? null;
  }
}

function write(key, value) {
  try {
    if (value === null) window.localStorage.removeItem(key);
    else window.localStorage.setItem(key, value);
  } catch {
    if (value === null) memory.delete(key);
    else memory.set(key, value);
  }
}

export const apiKey = {
  get: () => read(API_KEY_KEY) || '',
  set: (value) => write(API_KEY_KEY, value ? value : null),
};

export function titleOf(question) {
  const line = question.replace(/\s+/g, ' ').trim();
  return line.length > MAX_TITLE_CHARS ? `${line.slice(0, MAX_TITLE_CHARS - 1)}…` : line;
}

function validApproval(a) {
  return a && typeof a === 'object' && typeof a.approval_id === 'string' && typeof a.tool === 'string' ? a : null;
}

export function loadThreads() {
  let raw;
  try {
    raw = JSON.parse(read(THREADS_KEY) || '[]');
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((t) => t && typeof t.id === 'string' && THREAD_ID.test(t.id))
    .slice(0, MAX_THREADS)
    .map((t) => ({
      id: t.id,
      title: typeof t.title === 'string' && t.title ? titleOf(t.title) : t.id,
      updatedAt: typeof t.updatedAt === 'string' ? t.updatedAt : '',
      pending: validApproval(t.pending),
    }));
}

function saveThreads(threads) {
  write(THREADS_KEY, JSON.stringify(threads.slice(0, MAX_THREADS)));
}

export function getThread(id) {
  return loadThreads().find((t) => t.id === id) || null;
}

// Insert or update, newest first.
export function touchThread(id, changes) {
  const threads = loadThreads();
  const old = threads.find((t) => t.id === id);
  const entry = { id, title: id, pending: null, ...old, ...changes, updatedAt: new Date().toISOString() };
  saveThreads([entry, ...threads.filter((t) => t.id !== id)]);
  return entry;
}

export function removeThread(id) {
  saveThreads(loadThreads().filter((t) => t.id !== id));
}

// A thread id is made here so that the thread is in the list (and can be approved on) from its first
// question on; 128 random bits as hex, which THREAD_ID accepts. getRandomValues works on plain http too.
export function newThreadId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function onExternalChange(callback) {
  window.addEventListener('storage', (e) => {
    if (e.key === THREADS_KEY || e.key === null) callback();
  });
}
