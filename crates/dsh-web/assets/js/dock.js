// Below the conversation: the plan, the questions waiting for an answer, the queued
// follow-ups and the composer.
import { useState, useRef } from '../vendor/hooks.module.js';
import { html } from './util.js';
import { prompt, steer, enqueue, unqueue, cancel, answerAsk } from './store.js';
import { ContentBlocks, commandOf } from './transcript.js';

// What the approval card asks, by the kind of call.
const QUESTION = {
  execute: 'Run this command?',
  edit: 'Make this change?',
  delete: 'Delete this?',
  move: 'Move this?',
  fetch: 'Fetch this?',
};

const PLAN_MARK = { pending: '☐', in_progress: '◐', completed: '☑' };

function Plan({ plan }) {
  const [open, setOpen] = useState(true);
  if (!plan.length) return null;
  const done = plan.filter((e) => e.status === 'completed').length;
  return html`<div class="plan">
    <button type="button" class="plan-head" onClick=${() => setOpen(!open)}>Plan ${done}/${plan.length}</button>
    ${open && html`<ol class="plan-list">${plan.map((e, i) => html`<li key=${i} class=${e.status}>
      <span class="mark">${PLAN_MARK[e.status] ?? '☐'}</span>${e.content}</li>`)}</ol>`}
  </div>`;
}

function Approval({ view, ask }) {
  const [denying, setDenying] = useState(false);
  const [reason, setReason] = useState('');
  const call = ask.params.toolCall ?? {};
  const options = ask.params.options ?? [];
  const command = commandOf(call);
  const reject = options.find((o) => o.kind === 'reject_once') ?? options.find((o) => o.kind?.startsWith('reject'));
  const deny = () => answerAsk(view, ask, reject?.optionId ?? 'reject-once', reason.trim());
  return html`<div class="approval" data-ask=${String(ask.id)}>
    <div class="approval-head">
      <strong>${QUESTION[call.kind] ?? 'Allow this call?'}</strong>
      <span class=${call.kind === 'execute' ? 'mono' : ''}>${call.title}</span>
    </div>
    ${command && command !== call.title ? html`<pre class="command">$ ${command}</pre>` : null}
    <div class="approval-body"><${ContentBlocks} content=${call.content} /></div>
    ${denying
      ? html`<form class="deny" onSubmit=${(e) => { e.preventDefault(); deny(); }}>
          <input type="text" class="reason" placeholder="Why not? (the agent reads this)" value=${reason}
            onInput=${(e) => setReason(e.currentTarget.value)} autofocus />
          <button type="submit" class="danger">Deny</button>
          <button type="button" onClick=${() => setDenying(false)}>Back</button>
        </form>`
      : html`<div class="choices">
          ${options.filter((o) => !o.kind?.startsWith('reject')).map((o) => html`<button type="button"
            class=${o.kind === 'allow_once' ? 'primary' : ''} data-option=${o.optionId}
            onClick=${() => answerAsk(view, ask, o.optionId, '')}>${o.name}</button>`)}
          <button type="button" class="danger" data-option=${reject?.optionId ?? 'reject-once'}
            onClick=${() => answerAsk(view, ask, reject?.optionId ?? 'reject-once', '')}>Deny</button>
          <button type="button" class="link" onClick=${() => setDenying(true)}>Deny with a reason…</button>
        </div>`}
  </div>`;
}

function commandMenu(view, text) {
  const m = /^\/(\S*)$/.exec(text);
  if (!m) return [];
  return view.commands.filter((c) => c.name.startsWith(m[1]));
}

function Composer({ view }) {
  const [pick, setPick] = useState(0);
  // The draft lives on the view (it survives switching sessions, and Stop puts the queued
  // messages back into it); this only re-renders the composer when it changes.
  const [, redraw] = useState(0);
  const area = useRef(null);
  const text = view.draft;
  const setText = (t) => {
    view.draft = t;
    setPick(0);
    redraw((n) => n + 1);
  };
  const menu = commandMenu(view, text);
  const submit = (how) => {
    const t = view.draft.trim();
    if (!t) return;
    setText('');
    if (how === 'queue') enqueue(view, t);
    else if (view.busy) steer(view, t);
    else prompt(view, t);
  };
  const onKey = (e) => {
    if (menu.length) {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        setPick((p) => (p + (e.key === 'ArrowDown' ? 1 : menu.length - 1)) % menu.length);
        return;
      }
      if (e.key === 'Tab' || (e.key === 'Enter' && !e.shiftKey && menu[pick] && text !== `/${menu[pick].name}`)) {
        e.preventDefault();
        setText(`/${menu[pick].name} `);
        return;
      }
    }
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      submit(e.altKey && view.busy ? 'queue' : 'send');
    } else if (e.key === 'Escape' && view.busy) {
      e.preventDefault();
      cancel(view);
    }
  };
  if (view.watching) {
    return html`<div class="composer watching" id="watching">
      <span class="tag">live</span> Running in another dsh: following it as it commits, read-only.
      Prompt it where it runs, or open it again here once that dsh has closed it.
    </div>`;
  }
  const disabled = view.loading || !!view.error || view.closed;
  return html`<div class="composer">
    ${menu.length ? html`<ul class="commands" role="listbox">${menu.map((c, i) => html`<li key=${c.name}
      class=${i === pick ? 'picked' : ''} onMouseDown=${(e) => { e.preventDefault(); setText(`/${c.name} `); }}>
      <span class="cmd">/${c.name}</span> <span class="muted">${c.description}</span>
      ${c.input?.hint ? html` <span class="hint">${c.input.hint}</span>` : null}</li>`)}</ul>` : null}
    <textarea ref=${area} id="prompt" rows="3" disabled=${disabled}
      placeholder=${view.busy ? 'Steer the running turn (Enter), queue a follow-up (Alt+Enter), Esc stops' : 'Ask dsh… (/ for commands, Shift+Enter for a new line)'}
      value=${text} onInput=${(e) => setText(e.currentTarget.value)} onKeyDown=${onKey}></textarea>
    <div class="composer-actions">
      ${view.busy
        ? html`<button type="button" id="steer" onClick=${() => submit('send')}>Steer</button>
            <button type="button" id="queue" onClick=${() => submit('queue')}>Queue</button>
            <button type="button" id="stop" class="danger" onClick=${() => cancel(view)}>Stop</button>`
        : html`<button type="button" id="send" class="primary" disabled=${disabled} onClick=${() => submit('send')}>Send</button>`}
    </div>
  </div>`;
}

export function Dock({ view }) {
  return html`<div class="dock">
    <${Plan} plan=${view.plan} />
    ${view.asks.map((ask) => html`<${Approval} key=${String(ask.id)} view=${view} ask=${ask} />`)}
    ${view.queue.length ? html`<ul class="queue">${view.queue.map((q, i) => html`<li key=${i}>
      <span class="tag">queued</span><span class="queued-text">${q}</span>
      <button type="button" class="link" title="Remove" onClick=${() => unqueue(view, i)}>✕</button></li>`)}</ul>` : null}
    <${Composer} view=${view} />
  </div>`;
}
