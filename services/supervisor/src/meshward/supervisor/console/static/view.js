// One exchange on screen: the question, then the reply as it happens (route, tokens, approval, answer,
// metadata). Everything from the server is untrusted text and goes through dom.h / Text nodes only.
import { formatMs, formatTime, h, imageDataUrl } from './dom.js';

const FINISH = 'finish';
const MAX_ARGUMENTS_CHARS = 4_000;
const STATUS_TEXT = {
  answered: 'Answered',
  refused: 'Refused',
  error: 'Error',
  awaiting_approval: 'Waiting for approval',
};

function refusalText(response) {
  if (response.refusal_reason === 'security') {
    const category = response.threat_category ? ` (${response.threat_category})` : '';
    const by = response.decided_by ? `; decided by ${response.decided_by}` : '';
    return `Blocked by the security policy${category}${by}.`;
  }
  if (response.refusal_reason === 'out_of_scope') return 'Out of scope: not a data-center operations question.';
  return response.refusal_reason ? `Refused: ${response.refusal_reason}.` : 'Refused.';
}

function str(value) {
  return typeof value === 'string' ? value : '';
}

export function questionView(text, at) {
  return h('div', { class: 'message message-user' },
    h('p', { class: 'who' }, 'You', at ? h('time', { datetime: at, class: 'muted small' }, ` · ${formatTime(at)}`) : null),
    h('p', { class: 'text question-text' }, text));
}

// A turn read back from memory's history (no route or trace: the history keeps question, answer, status).
export function pastTurnView(turn) {
  const status = str(turn.status);
  return h('article', { class: 'turn turn-past', dataset: { status } },
    questionView(str(turn.question), str(turn.at)),
    h('div', { class: 'message message-assistant' },
      h('p', { class: 'who' }, 'meshward ', h('span', { class: `badge badge-${status}` }, STATUS_TEXT[status] || status)),
      h('p', { class: 'text answer-text' }, str(turn.answer))));
}

export class TurnView {
  // decide(approval, approved, reason) -> Promise<AskResponse>, the HTTP call of an approval decision
  constructor(question, { decide }) {
    this.decide = decide;
    this.draft = 0;
    this.routeList = h('ol', { class: 'route', 'aria-label': 'Route through the graph' });
    this.draftNote = h('p', { class: 'muted small draft-note', hidden: true });
    this.answerText = document.createTextNode('');
    this.answerEl = h('p', { class: 'text answer-text' }, this.answerText);
    this.statusEl = h('p', { class: 'status-line', hidden: true });
    this.approvals = h('div', { class: 'approvals' });
    this.images = h('div', { class: 'images' });
    this.errorEl = h('p', { class: 'error', role: 'alert', hidden: true });
    this.meta = h('dl', { class: 'meta', hidden: true });
    this.reply = h('div', { class: 'message message-assistant', 'aria-busy': 'true' },
      h('p', { class: 'who' }, 'meshward'),
      this.routeList, this.statusEl, this.draftNote, this.answerEl, this.approvals, this.images, this.errorEl, this.meta);
    this.el = h('article', { class: 'turn', dataset: { state: 'running' } }, question === null ? null : questionView(question), this.reply);
  }

  setPending(node) {
    this.routeList.querySelector('.pending')?.remove();
    if (node && node !== FINISH) {
      this.routeList.append(h('li', { class: 'pending' }, h('span', { class: 'node' }, node), h('span', { class: 'visually-hidden' }, ' (running)')));
    }
  }

  // `step` event: {node, ms, next}
  step(data) {
    const node = str(data.node);
    if (!node || node.startsWith('__')) return; // LangGraph's own markers (an interrupt) are not graph nodes
    this.setPending(null);
    this.routeList.append(h('li', { class: 'done', dataset: { node, live: 'true' } },
      h('span', { class: 'node' }, node), data.ms != null ? h('span', { class: 'ms' }, formatMs(data.ms)) : null));
    this.setPending(str(data.next));
  }

  // `token` event: {delta, draft, restart}; a restart or a new draft starts the text again
  token(data) {
    const draft = Number.isInteger(data.draft) ? data.draft : this.draft;
    if (data.restart || draft !== this.draft) {
      this.answerText.data = '';
      if (draft > 0) {
        this.draftNote.textContent = `Refining the answer (draft ${draft + 1})…`;
        this.draftNote.hidden = false;
      }
    }
    this.draft = draft;
    this.answerText.appendData(str(data.delta));
  }

  approval(approval, threadId) {
    if (!approval || typeof approval.approval_id !== 'string') return;
    if (this.approvals.querySelector(`[data-approval-id="${CSS.escape(approval.approval_id)}"]`)) return;
    this.approvals.append(approvalCard(approval, threadId, async (approved, reason) => {
      const response = await this.decide(approval, approved, reason);
      this.answer(response, threadId);
      return response;
    }));
  }

  // `answer` event (or the JSON reply of an approval decision): the AskResponse
  answer(response, threadId) {
    this.setPending(null);
    this.draftNote.hidden = true;
    this.answerText.data = str(response.answer);
    const status = str(response.status);
    this.el.dataset.state = status || 'error';
    this.el.dataset.status = status;
    this.statusEl.replaceChildren(h('span', { class: `badge badge-${status}` }, STATUS_TEXT[status] || status));
    if (status === 'refused') {
      this.statusEl.append(' ', h('span', { class: 'refusal-reason' }, refusalText(response)));
    }
    this.statusEl.hidden = false;
    this.reconcileRoute(response);
    this.showImages(response);
    if (status === 'awaiting_approval' && response.approval) this.approval(response.approval, threadId);
    this.showMeta(response);
    this.reply.setAttribute('aria-busy', status === 'awaiting_approval' ? 'true' : 'false');
  }

  // A reply that is not a run's (a pending approval shown again): plain text, nothing in progress
  note(text) {
    this.answerText.data = text;
    this.el.dataset.state = 'awaiting_approval';
    this.reply.setAttribute('aria-busy', 'false');
  }

  error(message) {
    this.setPending(null);
    this.errorEl.textContent = message;
    this.errorEl.hidden = false;
    this.el.dataset.state = 'failed';
    this.reply.setAttribute('aria-busy', 'false');
  }

  // The response's route is the record: keep what was shown live when it agrees, otherwise redraw it.
  reconcileRoute(response) {
    const route = Array.isArray(response.route) ? response.route.map(str) : [];
    const shown = [...this.routeList.querySelectorAll('li.done')].map((li) => li.dataset.node);
    if (route.length >= shown.length && shown.every((node, i) => node === route[i])) {
      const steps = Array.isArray(response.steps) ? response.steps : [];
      for (let i = shown.length; i < route.length; i++) {
        const ms = steps[i] && typeof steps[i].ms === 'number' ? steps[i].ms : null;
        this.routeList.append(h('li', { class: 'done', dataset: { node: route[i], live: 'false' } },
          h('span', { class: 'node' }, route[i]), ms != null ? h('span', { class: 'ms' }, formatMs(ms)) : null));
      }
      return;
    }
    this.routeList.replaceChildren(...route.map((node) => h('li', { class: 'done', dataset: { node, live: 'false' } }, h('span', { class: 'node' }, node))));
  }

  showImages(response) {
    const images = Array.isArray(response.images) ? response.images : [];
    const tools = Array.isArray(response.tools_used) ? response.tools_used.map(str).join(', ') : '';
    this.images.replaceChildren(...images.map((image, i) => {
      const src = imageDataUrl(image);
      const label = `Chart ${i + 1} of ${images.length}${tools ? ` from ${tools}` : ''}`;
      if (!src) return h('p', { class: 'muted small' }, `${label}: not shown (not a well-formed PNG, JPEG, GIF or WebP image).`);
      return h('figure', { class: 'chart' }, h('img', { src, alt: label }), h('figcaption', { class: 'muted small' }, label));
    }));
  }

  showMeta(response) {
    const rows = [];
    const row = (key, label, ...value) => rows.push(h('div', { class: 'meta-row' }, h('dt', {}, label), h('dd', { dataset: { key } }, ...value)));
    row('status', 'Status', STATUS_TEXT[response.status] || str(response.status));
    if (response.status === 'refused') row('refusal', 'Refusal', refusalText(response));
    if (response.intent) row('intent', 'Intent', str(response.intent));
    if (response.tier) row('tier', 'Tier', str(response.tier), response.tier_reason ? h('span', { class: 'muted' }, ` — ${str(response.tier_reason)}`) : null);
    row('model', 'Model', response.model ? str(response.model) : (response.tier === 'fast' ? 'none (fast tier)' : '—'));
    if (typeof response.confidence === 'number') row('confidence', 'Confidence', response.confidence.toFixed(2));
    const tools = Array.isArray(response.tools_used) ? response.tools_used.map(str) : [];
    row('tools', 'Tools', tools.length ? tools.join(', ') : 'none');
    const withheld = Array.isArray(response.withheld) ? response.withheld.map(str) : [];
    if (withheld.length) row('withheld', 'Withheld', withheld.join(', '));
    const usage = response.usage || {};
    if (usage.prompt_tokens || usage.completion_tokens) row('usage', 'Tokens', `${usage.prompt_tokens || 0} in, ${usage.completion_tokens || 0} out`);
    if (typeof response.duration_ms === 'number') row('duration', 'Duration', formatMs(response.duration_ms));
    const traceId = str(response.trace_id);
    const copy = h('button', { type: 'button', class: 'copy', title: 'Copy the trace id' }, 'Copy');
    copy.addEventListener('click', () => copyText(traceId, copy));
    row('trace_id', 'Trace id', h('code', { class: 'trace-id' }, traceId), ' ', copy);
    row('request_id', 'Request id', h('code', {}, str(response.request_id)));
    this.meta.replaceChildren(...rows);
    this.meta.hidden = false;
  }
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Select and copy';
  }
}

// An approval request of the graph (README: Approvals): tool, arguments, the policy's reason, a deadline.
// decide(approved, reason) sends the decision; the answer that follows is drawn by the turn.
export function approvalCard(approval, threadId, decide) {
  const id = `approval-${approval.approval_id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  let args = '';
  try {
    args = JSON.stringify(approval.arguments ?? {}, null, 2) ?? '';
  } catch {
    args = String(approval.arguments);
  }
  if (args.length > MAX_ARGUMENTS_CHARS) args = `${args.slice(0, MAX_ARGUMENTS_CHARS)}\n… (cut)`;
  const expires = new Date(str(approval.expires_at));
  const countdown = h('span', { class: 'countdown' });
  const reasonInput = h('input', { id: `${id}-reason`, type: 'text', maxlength: '500', autocomplete: 'off' });
  const approve = h('button', { type: 'button', class: 'approve' }, 'Approve');
  const deny = h('button', { type: 'button', class: 'deny' }, 'Deny');
  const outcome = h('p', { class: 'decision', role: 'status' });
  const card = h('section', { class: 'approval', 'aria-labelledby': `${id}-title`, dataset: { approvalId: approval.approval_id, state: 'pending' } },
    h('h3', { id: `${id}-title` }, 'Approval needed: ', h('code', { class: 'approval-tool' }, str(approval.tool))),
    h('p', { class: 'approval-reason' }, str(approval.reason)),
    h('pre', { class: 'approval-arguments', 'aria-label': 'Arguments' }, args),
    Number.isNaN(expires.getTime()) ? null
      : h('p', { class: 'muted small' }, 'Expires ', h('time', { datetime: expires.toISOString() }, expires.toLocaleTimeString()), ' ', countdown,
        ' — no decision by then counts as a denial.'),
    h('p', { class: 'muted small' }, 'Thread ', h('code', {}, threadId)),
    h('div', { class: 'approval-form' },
      h('label', { for: `${id}-reason` }, 'Reason (optional)'), reasonInput, approve, deny),
    outcome);

  let timer = null;
  const finish = (state, text) => {
    clearInterval(timer);
    countdown.textContent = '';
    card.dataset.state = state;
    approve.disabled = deny.disabled = reasonInput.disabled = true;
    outcome.textContent = text;
  };
  const tick = () => {
    const left = Math.round((expires.getTime() - Date.now()) / 1000);
    if (left <= 0) {
      finish('expired', 'Expired: counted as denied.');
      return;
    }
    countdown.textContent = `(in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')})`;
  };
  if (!Number.isNaN(expires.getTime())) {
    tick();
    if (card.dataset.state === 'pending') timer = setInterval(tick, 1000);
  }

  const send = async (approved) => {
    approve.disabled = deny.disabled = reasonInput.disabled = true;
    outcome.textContent = approved ? 'Sending the approval…' : 'Sending the denial…';
    try {
      await decide(approved, reasonInput.value.trim() || null);
      finish(approved ? 'approved' : 'denied', approved ? 'Approved.' : 'Denied.');
    } catch (e) {
      if (e.status === 409 || e.status === 404) {
        finish('gone', `No longer pending: ${e.message}`);
      } else {
        outcome.textContent = `The decision was not recorded: ${e.message}`;
        approve.disabled = deny.disabled = reasonInput.disabled = false;
      }
    }
  };
  approve.addEventListener('click', () => send(true));
  deny.addEventListener('click', () => send(false));
  return card;
}
