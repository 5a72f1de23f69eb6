// The dsh web UI: sessions on the left, the open session on the right. Everything it shows
// and does goes through ACP over the server's WebSocket (js/acp.js, js/store.js).
import { render } from './vendor/preact.module.js';
import { useState, useEffect, useRef } from './vendor/hooks.module.js';
import { html } from './js/util.js';
import { store, start, newSession, currentView } from './js/store.js';
import { Sidebar } from './js/sidebar.js';
import { Header } from './js/header.js';
import { Transcript } from './js/transcript.js';
import { Dock } from './js/dock.js';

// Figures the browser tests and benchmarks read: when the sessions were first on screen, and
// every task that blocked the page for more than 50 ms.
window.__dsh = { ready: null, longTasks: [], marks: { script: performance.now() } };
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__dsh.longTasks.push({ start: e.startTime, duration: e.duration });
  }).observe({ type: 'longtask', buffered: true });
} catch {
  // Browsers without the Long Tasks API (Firefox) simply report none.
}

function useStore() {
  const [, redraw] = useState(0);
  useEffect(() => store.subscribe(() => redraw((n) => n + 1)), []);
  return store.state;
}

function NewSessionDialog({ state }) {
  const dirs = [...new Set((state.sessions ?? []).map((s) => s.cwd))];
  const suggested = currentView()?.cwd ?? state.agent?._meta?.dsh?.cwd ?? dirs[0] ?? '';
  const [cwd, setCwd] = useState(suggested);
  const [error, setError] = useState(null);
  const input = useRef(null);
  useEffect(() => input.current?.focus(), []);
  const close = () => { store.state.dialog = null; store.changed(); };
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      await newSession(cwd.trim());
    } catch (err) {
      setError(err.message);
    }
  };
  return html`<div class="backdrop" onClick=${(e) => e.target === e.currentTarget && close()}>
    <form class="dialog" id="new-session-dialog" onSubmit=${create}>
      <h2>New session</h2>
      <label>Working directory
        <input ref=${input} id="new-cwd" type="text" list="known-dirs" value=${cwd} placeholder="/absolute/path/to/project"
          onInput=${(e) => setCwd(e.currentTarget.value)} onKeyDown=${(e) => e.key === 'Escape' && close()} />
      </label>
      <datalist id="known-dirs">${dirs.map((d) => html`<option value=${d} />`)}</datalist>
      ${error ? html`<p class="error">${error}</p>` : null}
      <div class="dialog-actions">
        <button type="button" onClick=${close}>Cancel</button>
        <button type="submit" class="primary" id="create-session">Start</button>
      </div>
    </form>
  </div>`;
}

function Welcome({ state }) {
  return html`<div class="welcome">
    <button type="button" class="menu" onClick=${() => { store.state.sidebar = !store.state.sidebar; store.changed(); }}>☰</button>
    <h1>dsh</h1>
    <p>Open a session on the left, or start a new one.</p>
    <button type="button" class="primary" onClick=${() => { store.state.dialog = 'new'; store.changed(); }}>New session</button>
    ${state.agent?.agentInfo ? html`<p class="muted">${state.agent.agentInfo.name} ${state.agent.agentInfo.version}</p>` : null}
  </div>`;
}

const CONN = { connecting: 'Connecting to dsh…', closed: 'Lost the connection to dsh; reconnecting…', failed: 'dsh refused the connection.' };

function App() {
  const state = useStore();
  const view = currentView();
  return html`<div class="app">
    ${state.conn !== 'open' ? html`<div class="banner">${CONN[state.conn] ?? state.conn}</div>` : null}
    <${Sidebar} state=${state} />
    <main class="main">
      ${view
        ? html`<${Header} view=${view} />
            <${Transcript} key=${view.id} view=${view} />
            <${Dock} key=${view.id} view=${view} />`
        : html`<${Welcome} state=${state} />`}
    </main>
    ${state.dialog === 'new' ? html`<${NewSessionDialog} state=${state} />` : null}
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
start();
