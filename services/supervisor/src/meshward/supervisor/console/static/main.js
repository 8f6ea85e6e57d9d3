// The console page: wiring of the API, the stored threads and the views.
import { Api } from './api.js';
import { h } from './dom.js';
import * as store from './store.js';
import { pastTurnView, TurnView } from './view.js';

const HEALTH_EVERY_MS = 15_000;
const HISTORY_LIMIT = 50;

const $ = (id) => document.getElementById(id);
const ui = {
  health: $('health'),
  keyForm: $('key-form'),
  keyInput: $('api-key'),
  keyForget: $('key-forget'),
  keyStatus: $('key-status'),
  newThread: $('new-thread'),
  threadList: $('thread-list'),
  threadsEmpty: $('threads-empty'),
  heading: $('conversation-heading'),
  threadIdLine: $('thread-id'),
  conversation: $('conversation'),
  askForm: $('ask-form'),
  question: $('question'),
  send: $('send'),
  stop: $('stop'),
  askStatus: $('ask-status'),
  announcer: $('announcer'),
};

const api = new Api(store.apiKey.get);
const state = { threadId: null, controller: null, opening: null };

// ---------------------------------------------------------------- API key

function showKeyState() {
  const set = Boolean(store.apiKey.get());
  ui.keyInput.value = '';
  ui.keyInput.placeholder = set ? 'saved (hidden)' : 'none (loopback)';
  ui.keyStatus.textContent = set ? 'A key is saved in this browser and sent as X-Api-Key.' : '';
}

ui.keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const value = ui.keyInput.value.trim();
  if (!value) {
    ui.keyStatus.textContent = 'Type a key first, or use Forget to remove the saved one.';
    return;
  }
  store.apiKey.set(value);
  showKeyState();
  refreshHealth();
});

ui.keyForget.addEventListener('click', () => {
  store.apiKey.set(null);
  showKeyState();
  ui.keyStatus.textContent = 'The key was removed from this browser.';
  refreshHealth();
});

// ---------------------------------------------------------------- health

let healthTimer = null;
async function refreshHealth() {
  clearTimeout(healthTimer);
  let text;
  let kind;
  try {
    const body = await api.json('GET', '/healthz');
    kind = 'ok';
    const llm = body.services && body.services.llm;
    text = `All services ready${llm && !llm.ready ? ' (deep tier unavailable: no llm service)' : ''}.`;
  } catch (e) {
    kind = 'down';
    text = e.status === 503 ? 'Some services are unavailable: questions may fail.' : `Health check failed: ${e.message}`;
  }
  if (ui.health.textContent !== text) ui.health.textContent = text;
  ui.health.dataset.state = kind;
  if (!document.hidden) healthTimer = setTimeout(refreshHealth, HEALTH_EVERY_MS);
}
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) refreshHealth();
});

// ---------------------------------------------------------------- threads

function renderThreads() {
  const threads = store.loadThreads();
  ui.threadsEmpty.hidden = threads.length > 0;
  ui.threadList.replaceChildren(...threads.map((t) => {
    const open = h('button', { type: 'button', class: 'thread-open', 'aria-current': t.id === state.threadId ? 'true' : null },
      h('span', { class: 'thread-title' }, t.title),
      t.pending ? h('span', { class: 'badge badge-awaiting_approval' }, 'approval pending') : null);
    open.addEventListener('click', () => openThread(t.id));
    const remove = h('button', { type: 'button', class: 'thread-remove', 'aria-label': `Remove “${t.title}” from this list` }, '×');
    remove.addEventListener('click', () => {
      store.removeThread(t.id);
      if (t.id === state.threadId) newConversation();
      else renderThreads();
    });
    return h('li', { dataset: { threadId: t.id } }, open, remove);
  }));
}

function showThreadHeading(thread) {
  ui.heading.textContent = thread ? thread.title : 'New conversation';
  ui.threadIdLine.hidden = !thread;
  ui.threadIdLine.replaceChildren(...(thread ? ['Thread ', h('code', {}, thread.id)] : []));
}

function newConversation() {
  stopAsking();
  state.threadId = null;
  ui.conversation.replaceChildren();
  showThreadHeading(null);
  renderThreads();
  ui.question.focus();
}

async function openThread(id) {
  stopAsking();
  const thread = store.getThread(id);
  if (!thread) return;
  state.threadId = id;
  showThreadHeading(thread);
  renderThreads();
  const loading = h('p', { class: 'muted', role: 'status' }, 'Loading the conversation…');
  ui.conversation.replaceChildren(loading);
  const opening = (state.opening = Symbol(id));
  let turns = [];
  let problem = null;
  try {
    const body = await api.json('GET', `/v1/threads/${encodeURIComponent(id)}/history?limit=${HISTORY_LIMIT}`);
    turns = Array.isArray(body.turns) ? body.turns : [];
  } catch (e) {
    problem = e.status === 404 ? 'The server has no history for this thread.' : `The history could not be read: ${e.message}`;
  }
  if (state.opening !== opening) return; // another thread was opened meanwhile
  ui.conversation.replaceChildren(...turns.map(pastTurnView));
  if (problem) ui.conversation.append(h('p', { class: 'error', role: 'alert' }, problem));
  else if (!turns.length) ui.conversation.append(h('p', { class: 'muted' }, 'No stored turns for this thread yet.'));
  if (thread.pending) {
    const turn = new TurnView(null, { decide: (approval, approved, reason) => decide(id, approved, reason) });
    turn.note('A command from this thread is waiting for your decision:');
    turn.approval(thread.pending, id);
    ui.conversation.append(turn.el);
  }
  ui.conversation.lastElementChild?.scrollIntoView({ block: 'end' });
}

store.onExternalChange(renderThreads);
ui.newThread.addEventListener('click', newConversation);

// ---------------------------------------------------------------- approvals

async function decide(threadId, approved, reason) {
  const body = { approved };
  if (reason) body.reason = reason;
  try {
    const response = await api.json('POST', `/v1/threads/${encodeURIComponent(threadId)}/approval`, body);
    rememberOutcome(threadId, response);
    announce(response);
    return response;
  } catch (e) {
    if (e.status === 409 || e.status === 404) store.touchThread(threadId, { pending: null });
    renderThreads();
    throw e;
  }
}

function rememberOutcome(threadId, response) {
  const pending = response && response.status === 'awaiting_approval' && response.approval ? response.approval : null;
  store.touchThread(threadId, { pending });
  renderThreads();
}

// ---------------------------------------------------------------- asking

// The conversation log is not a live region (every streamed token would be read out): the finished answer is
// announced once, here.
const ANNOUNCED_CHARS = 300;
function announce(response) {
  const status = { answered: 'Answer', refused: 'Refused', error: 'Error', awaiting_approval: 'Approval needed' }[response.status] || 'Reply';
  const answer = typeof response.answer === 'string' ? response.answer : '';
  ui.announcer.textContent = `${status}: ${answer.length > ANNOUNCED_CHARS ? `${answer.slice(0, ANNOUNCED_CHARS)}…` : answer}`;
}

function busy(on) {
  ui.send.disabled = on;
  ui.stop.hidden = !on;
  ui.askStatus.textContent = on ? 'Working on it…' : '';
}

function stopAsking() {
  if (state.controller) state.controller.abort();
}

async function ask(question) {
  if (!state.threadId) state.threadId = store.newThreadId();
  const threadId = state.threadId;
  const known = store.getThread(threadId);
  const thread = store.touchThread(threadId, { title: known ? known.title : store.titleOf(question) });
  showThreadHeading(thread);
  renderThreads();

  const turn = new TurnView(question, { decide: (approval, approved, reason) => decide(threadId, approved, reason) });
  ui.conversation.querySelector(':scope > p.muted')?.remove();
  ui.conversation.append(turn.el);
  turn.el.scrollIntoView({ block: 'end' });
  const controller = (state.controller = new AbortController());
  busy(true);
  let final = null;
  try {
    for await (const { event, data } of api.ask({ question, thread_id: threadId }, { signal: controller.signal })) {
      if (event === 'step') turn.step(data);
      else if (event === 'token') turn.token(data);
      else if (event === 'approval') turn.approval(data, threadId);
      else if (event === 'answer') turn.answer((final = data), threadId);
      else if (event === 'error') turn.error((data.error && data.error.message) || 'the server reported an error');
    }
    if (final) {
      rememberOutcome(threadId, final);
      announce(final);
    }
    else if (turn.el.dataset.state === 'running') turn.error('The answer stream ended early: try again.');
  } catch (e) {
    turn.error(e.name === 'AbortError' ? 'Stopped.' : e.message);
  } finally {
    if (state.controller === controller) state.controller = null;
    busy(false);
    turn.el.scrollIntoView({ block: 'end' });
  }
}

ui.askForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const question = ui.question.value.trim();
  if (!question) return;
  if (state.controller) {
    ui.askStatus.textContent = 'Still working on the previous question: wait for it, or stop it.';
    return;
  }
  ui.question.value = '';
  ask(question);
});

ui.question.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.askForm.requestSubmit();
  }
});

ui.stop.addEventListener('click', stopAsking);

// ---------------------------------------------------------------- start

showKeyState();
renderThreads();
refreshHealth();
