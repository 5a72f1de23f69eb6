// The sessions sidebar: every session of the store, newest first, grouped by directory, with
// a filter. Memoised on the list's revision: it holds up to thousands of rows and must not
// be diffed on every frame of a streaming answer.
import { useEffect, useLayoutEffect } from '../vendor/hooks.module.js';
import { html, memo, ago, shortDir } from './util.js';
import { store, openSession } from './store.js';

function matches(row, filter) {
  if (!filter) return true;
  const f = filter.toLowerCase();
  return (row.title ?? '').toLowerCase().includes(f) || (row.cwd ?? '').toLowerCase().includes(f) || row.sessionId.startsWith(f);
}

// Rows drawn at first; more follow as the list is scrolled to its end. A person sees a few
// dozen at once, and drawing thousands would delay the page.
const ROWS = 150;

function groups(rows, filter, limit) {
  const byDir = new Map();
  let n = 0;
  for (const row of rows) {
    if (!matches(row, filter)) continue;
    if (n++ >= limit) break;
    let group = byDir.get(row.cwd);
    if (!group) byDir.set(row.cwd, (group = []));
    group.push(row);
  }
  return [...byDir.entries()];
}

function Row({ row, active, running, asking }) {
  return html`<li>
    <button type="button" class=${`session${active ? ' active' : ''}`} data-session=${row.sessionId}
      title=${row.title ?? row.sessionId} onClick=${() => openSession(row)}>
      <span class="session-title">${row.title || 'Untitled session'}</span>
      <span class="session-meta">
        ${asking ? html`<span class="badge ask" title="Waits for your approval">approve</span>` : running ? html`<span class="badge run" title="Working">●</span>` : null}
        ${ago(row.updatedAt)}
      </span>
    </button>
  </li>`;
}

function SessionList({ rows, filter, current, live, limit, more }) {
  if (rows && window.__dsh && window.__dsh.marks.listRender == null) window.__dsh.marks.listRender = performance.now();
  useLayoutEffect(() => {
    if (rows && window.__dsh && window.__dsh.marks.listCommitted == null) window.__dsh.marks.listCommitted = performance.now();
  }, [rows]);
  useEffect(() => {
    // The figure the page-ready benchmark reads: the first time the sessions are on screen.
    if (rows && window.__dsh && window.__dsh.ready == null) window.__dsh.ready = performance.now();
  }, [rows]);
  if (!rows) return html`<p class="muted pad">Loading sessions…</p>`;
  const list = groups(rows, filter, limit);
  const drawn = list.reduce((n, [, g]) => n + g.length, 0);
  if (!list.length) return html`<p class="muted pad">${rows.length ? 'No session matches.' : 'No sessions yet.'}</p>`;
  const onScroll = (e) => {
    const el = e.currentTarget;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 400) more();
  };
  return html`<div class="sessions" data-count=${rows.length} onScroll=${onScroll}>
    ${list.map(([dir, group]) => html`<section class="group" key=${dir}>
      <h3 title=${dir}>${shortDir(dir)}</h3>
      <ul>${group.map((row) => html`<${Row} key=${row.sessionId} row=${row} active=${row.sessionId === current}
        running=${live.get(row.sessionId)?.busy} asking=${live.get(row.sessionId)?.asks} />`)}</ul>
    </section>`)}
    ${drawn >= limit ? html`<button type="button" class="link more" onClick=${more}>More sessions…</button>` : null}
  </div>`;
}

const MemoList = memo(SessionList, (a, b) => a.rows === b.rows && a.rev === b.rev && a.filter === b.filter && a.current === b.current && a.liveKey === b.liveKey && a.limit === b.limit);

const moreRows = () => {
  store.state.rowLimit += ROWS;
  store.changed();
};

export function Sidebar({ state }) {
  // What the rows show of sessions open in this page (running, asking), as one key.
  const live = new Map();
  let liveKey = '';
  for (const [id, view] of state.views) {
    live.set(id, { busy: view.busy, asks: view.asks.length > 0 });
    liveKey += `${id}:${view.busy ? 1 : 0}${view.asks.length ? 1 : 0};`;
  }
  return html`<aside class=${`sidebar${state.sidebar ? ' open' : ''}`}>
    <div class="side-head">
      <span class="brand">dsh</span>
      <button type="button" class="primary" id="new-session" onClick=${() => { store.state.dialog = 'new'; store.changed(); }}>New session</button>
    </div>
    <input class="filter" type="search" placeholder="Filter sessions" value=${state.filter}
      onInput=${(e) => { store.state.filter = e.currentTarget.value; store.changed(); }} />
    ${state.listError ? html`<p class="error pad">${state.listError}</p>` : null}
    <${MemoList} rows=${state.sessions} rev=${state.sessionsRev} filter=${state.filter} current=${state.current} live=${live} liveKey=${liveKey}
      limit=${state.rowLimit ?? ROWS} more=${moreRows} />
  </aside>`;
}
