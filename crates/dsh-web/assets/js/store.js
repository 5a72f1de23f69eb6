// The page's state and what changes it: ACP updates folded into a transcript per session,
// and the person's actions turned into ACP requests. Components read `store.state` and
// re-render at most once per animation frame after a change (a replay of a long session is
// thousands of frames; each one only mutates the model).
import { Connection, AcpError } from './acp.js';

const listeners = new Set();
let scheduled = false;

export const store = {
  state: {
    conn: 'connecting',
    agent: null, // the initialize answer
    sessions: null, // session/list rows, newest first; null until listed
    sessionsRev: 0, // bumped when a row changes (the sidebar is memoised on it)
    listError: null,
    filter: '',
    rowLimit: 150, // sidebar rows drawn (grows as the list is scrolled)
    current: null, // id of the session shown
    views: new Map(), // every session this page opened: id -> view
    dialog: null, // 'new' while the new-session dialog is open
    sidebar: false, // shown over the page on a narrow window
    rev: 0,
  },
  subscribe(fn) {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },
  changed() {
    store.state.rev++;
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      for (const fn of listeners) fn();
    });
  },
};

const conn = new Connection({
  onState(state, init) {
    const s = store.state;
    const wasClosed = s.conn === 'closed';
    s.conn = state;
    if (state === 'open') {
      mark('initialized');
      s.agent = init;
      listSessions();
      if (wasClosed && s.current) {
        // The connection was lost: every view is stale; reopen the one on screen.
        const view = s.views.get(s.current);
        s.views.clear();
        if (view) openSession({ sessionId: view.id, cwd: view.cwd, title: view.title });
      }
    }
    store.changed();
  },
  onNotification(method, params) {
    if (method === 'session/update') {
      const view = store.state.views.get(params.sessionId);
      if (view) {
        apply(view, params.update);
        store.changed();
      }
    } else if (method === '_dsh/session_closed') {
      const view = store.state.views.get(params.sessionId);
      if (view) {
        view.closed = true;
        push(view, { kind: 'note', text: 'This session was closed in another tab.' });
        store.changed();
      }
    }
  },
  onRequest(method, params, id) {
    if (method !== 'session/request_permission') {
      return Promise.reject(new AcpError({ code: -32601, message: `${method} is not offered` }));
    }
    const view = store.state.views.get(params.sessionId);
    if (!view) return Promise.resolve({ outcome: { outcome: 'cancelled' } });
    return new Promise((resolve) => {
      view.asks.push({ id, params, resolve });
      store.changed();
    });
  },
  onWithdraw(id) {
    for (const view of store.state.views.values()) {
      const i = view.asks.findIndex((a) => a.id === id);
      if (i >= 0) {
        view.asks[i].resolve(undefined);
        view.asks.splice(i, 1);
        store.changed();
      }
    }
  },
});

export function start() {
  conn.open();
}

function newView(id, cwd, title) {
  return {
    id,
    cwd,
    title: title ?? null,
    items: [],
    tools: new Map(), // tool call id -> item
    plan: [],
    usage: null,
    commands: [],
    modes: null,
    options: [],
    busy: false,
    queue: [],
    asks: [],
    loading: true,
    error: null,
    closed: false,
    draft: '',
  };
}

// Adds an item to the transcript. Every item carries `rev`, bumped on each change, so a
// memoised component re-renders only the items that changed.
function push(view, item) {
  item.rev = 0;
  view.items.push(item);
  return item;
}

function touch(item) {
  item.rev++;
}

function blockText(block) {
  if (!block) return '';
  if (block.type === 'text') return block.text ?? '';
  if (block.type === 'resource_link') return `[${block.name ?? block.uri}](${block.uri})`;
  return `[${block.type}]`;
}

// Folds one session/update into the view.
export function apply(view, update) {
  const last = view.items[view.items.length - 1];
  switch (update.sessionUpdate) {
    case 'user_message_chunk':
      push(view, { kind: 'user', text: blockText(update.content), steer: !!update._meta?.dsh?.steer });
      break;
    case 'agent_message_chunk':
    case 'agent_thought_chunk': {
      const kind = update.sessionUpdate === 'agent_message_chunk' ? 'agent' : 'thought';
      if (last && last.kind === kind) {
        last.text += blockText(update.content);
        touch(last);
      } else {
        push(view, { kind, text: blockText(update.content) });
      }
      break;
    }
    case 'tool_call':
    case 'tool_call_update': {
      let item = view.tools.get(update.toolCallId);
      if (!item) {
        item = push(view, { kind: 'tool', id: update.toolCallId, title: '', status: 'pending', content: [] });
        view.tools.set(update.toolCallId, item);
      }
      for (const key of ['title', 'kind', 'status', 'content', 'rawInput', 'rawOutput', 'locations']) {
        if (update[key] !== undefined && update[key] !== null) item[key === 'kind' ? 'toolKind' : key] = update[key];
      }
      touch(item);
      break;
    }
    case 'plan':
      view.plan = update.entries ?? [];
      break;
    case 'usage_update':
      view.usage = { used: update.used, size: update.size, cost: update.cost, meta: update._meta?.dsh };
      break;
    case 'available_commands_update':
      view.commands = update.availableCommands ?? [];
      break;
    case 'current_mode_update':
      if (view.modes) view.modes = { ...view.modes, currentModeId: update.currentModeId };
      break;
    case 'config_option_update':
      view.options = update.configOptions ?? [];
      break;
    case 'session_info_update':
      if (update.title) {
        view.title = update.title;
        const row = store.state.sessions?.find((r) => r.sessionId === view.id);
        if (row) row.title = update.title;
        store.state.sessionsRev++;
      }
      break;
    default:
      break;
  }
}

// Marks for the figures the benchmarks print (milliseconds since the page started).
function mark(name) {
  if (window.__dsh && window.__dsh.marks[name] == null) window.__dsh.marks[name] = performance.now();
}

export async function listSessions() {
  try {
    mark('listAsked');
    const result = await conn.request('session/list', {});
    mark('listAnswered');
    store.state.sessions = result.sessions ?? [];
    store.state.sessionsRev++;
    store.state.listError = null;
  } catch (e) {
    store.state.listError = e.message;
    store.state.sessions = store.state.sessions ?? [];
  }
  store.changed();
}

function adopt(view, answer) {
  view.modes = answer?.modes ?? null;
  view.options = answer?.configOptions ?? [];
  // A session another dsh runs: shown as it goes on there, read-only.
  view.watching = answer?._meta?.dsh?.watching === true;
  view.loading = false;
}

// Shows a session: a session this page has open already is shown as it is; another (or one
// that was closed or failed to load) is loaded: the agent replays it, or the server joins this
// page to a session another tab has open.
export async function openSession(info) {
  const s = store.state;
  s.current = info.sessionId;
  s.sidebar = false;
  const open = s.views.get(info.sessionId);
  if (open && !open.closed && !open.error) {
    store.changed();
    return;
  }
  const view = newView(info.sessionId, info.cwd, info.title);
  s.views.set(info.sessionId, view);
  store.changed();
  try {
    mark('loadAsked');
    adopt(view, await conn.request('session/load', { sessionId: info.sessionId, cwd: info.cwd, mcpServers: [] }));
    mark('loadAnswered');
  } catch (e) {
    view.loading = false;
    view.error = e.message;
  }
  store.changed();
}

export async function newSession(cwd) {
  const s = store.state;
  const answer = await conn.request('session/new', { cwd, mcpServers: [] });
  const view = newView(answer.sessionId, cwd, null);
  adopt(view, answer);
  s.views.set(answer.sessionId, view);
  s.current = answer.sessionId;
  s.dialog = null;
  s.sidebar = false;
  s.sessions = [{ sessionId: answer.sessionId, cwd, title: null, updatedAt: new Date().toISOString() }, ...(s.sessions ?? [])];
  s.sessionsRev++;
  store.changed();
}

export function currentView() {
  return store.state.current ? store.state.views.get(store.state.current) : null;
}

const STOPS = {
  cancelled: 'Stopped.',
  max_tokens: 'The answer hit the output-token limit.',
  max_turn_requests: 'Stopped: the turn made too many requests.',
  refusal: 'The model refused.',
};

// Sends `text` as a prompt of its own; when it ends normally, the next queued message goes.
export async function prompt(view, text) {
  push(view, { kind: 'user', text });
  view.busy = true;
  store.changed();
  let stop = null;
  try {
    const answer = await conn.request('session/prompt', { sessionId: view.id, prompt: [{ type: 'text', text }] });
    stop = answer?.stopReason;
    if (STOPS[stop]) push(view, { kind: 'note', text: STOPS[stop] });
  } catch (e) {
    push(view, { kind: 'note', text: `Error: ${e.message}`, error: true });
  }
  view.busy = false;
  const row = store.state.sessions?.find((r) => r.sessionId === view.id);
  if (row) {
    row.updatedAt = new Date().toISOString();
    store.state.sessionsRev++;
  }
  if (stop === 'end_turn' && view.queue.length) {
    const next = view.queue.shift();
    store.changed();
    return prompt(view, next);
  }
  store.changed();
}

// A message for the running turn, taken at its next step. If the turn ended meanwhile the
// server says so, and it goes as a prompt instead.
export async function steer(view, text) {
  try {
    await conn.request('_dsh/steer', { sessionId: view.id, prompt: [{ type: 'text', text }] });
    push(view, { kind: 'user', text, steer: true });
    store.changed();
  } catch (e) {
    if (!view.busy) return prompt(view, text);
    push(view, { kind: 'note', text: `Not sent: ${e.message}`, error: true });
    store.changed();
  }
}

export function enqueue(view, text) {
  view.queue.push(text);
  store.changed();
}

export function unqueue(view, index) {
  view.queue.splice(index, 1);
  store.changed();
}

// Stops the running turn. Queued messages go back into the composer rather than running
// after something the person just stopped.
export function cancel(view) {
  conn.notify('session/cancel', { sessionId: view.id });
  if (view.queue.length) {
    view.draft = [view.draft, ...view.queue].filter(Boolean).join('\n\n');
    view.queue = [];
  }
  store.changed();
}

export async function setMode(view, modeId) {
  try {
    await conn.request('session/set_mode', { sessionId: view.id, modeId });
    view.modes = { ...view.modes, currentModeId: modeId };
  } catch (e) {
    push(view, { kind: 'note', text: `Mode not changed: ${e.message}`, error: true });
  }
  store.changed();
}

export async function setOption(view, configId, value) {
  try {
    const answer = await conn.request('session/set_config_option', { sessionId: view.id, configId, value });
    view.options = answer?.configOptions ?? view.options;
  } catch (e) {
    push(view, { kind: 'note', text: `Not changed: ${e.message}`, error: true });
  }
  store.changed();
}

// Answers a permission question. A deny reason travels in `_meta.dsh.reason`; the server
// tells the model before it reads the denial.
export function answerAsk(view, ask, optionId, reason) {
  const i = view.asks.indexOf(ask);
  if (i >= 0) view.asks.splice(i, 1);
  const result = { outcome: { outcome: 'selected', optionId } };
  if (reason) result._meta = { dsh: { reason } };
  ask.resolve(result);
  store.changed();
}
