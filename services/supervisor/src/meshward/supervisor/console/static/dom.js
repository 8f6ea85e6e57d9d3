// DOM from data without HTML strings: every string becomes a Text node or an attribute value, never markup.
// (The page's Content-Security-Policy enforces Trusted Types, so an innerHTML assignment would throw anyway.)

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') {
      el.className = value;
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key.startsWith('on')) {
      if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
      el.addEventListener(key.slice(2), value);
    } else if (key === 'hidden' || key === 'disabled') {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Charts come as base64 from the plot tool (through the model's answer path, so untrusted): only the raster
// types below, only well-formed base64, and only when the bytes start like the declared type. SVG is not
// accepted: it is a document, not an image.
const SIGNATURES = {
  'image/png': (b) => b.startsWith('\x89PNG\r\n\x1a\n'),
  'image/jpeg': (b) => b.startsWith('\xff\xd8\xff'),
  'image/gif': (b) => b.startsWith('GIF87a') || b.startsWith('GIF89a'),
  'image/webp': (b) => b.startsWith('RIFF') && b.slice(8, 12) === 'WEBP',
};
export const MAX_IMAGE_BASE64_CHARS = 12_000_000;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function imageDataUrl(image) {
  if (!image || typeof image.mime_type !== 'string' || typeof image.data_base64 !== 'string') return null;
  const type = image.mime_type.trim().toLowerCase();
  const data = image.data_base64;
  const looksLike = SIGNATURES[type];
  if (!looksLike || data.length < 16 || data.length > MAX_IMAGE_BASE64_CHARS || data.length % 4 !== 0 || !BASE64.test(data)) {
    return null;
  }
  let head;
  try {
    head = atob(data.slice(0, 16));
  } catch {
    return null;
  }
  return looksLike(head) ? `data:${type};base64,${data}` : null;
}

export function formatMs(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

export function formatTime(value) {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleString();
}
