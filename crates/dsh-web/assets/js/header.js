// The session's bar: title and directory, the mode and model pickers (ACP session modes and
// config options), and what the session uses: context, tokens and cost.
import { html, tokens, money } from './util.js';
import { store, setMode, setOption } from './store.js';

function flatOptions(option) {
  // A select's options may come in groups.
  return (option.options ?? []).flatMap((o) => (Array.isArray(o.options) ? o.options.map((x) => ({ ...x, group: o.name })) : [o]));
}

function OptionPicker({ view, option }) {
  return html`<label class="picker" title=${option.description ?? option.name}>
    <span>${option.name}</span>
    <select data-option=${option.id} value=${option.currentValue}
      onChange=${(e) => setOption(view, option.id, e.currentTarget.value)}>
      ${flatOptions(option).map((o) => html`<option value=${o.value} title=${o.description ?? ''}>${o.group ? `${o.group}: ` : ''}${o.name}</option>`)}
    </select>
  </label>`;
}

function Usage({ usage }) {
  if (!usage) return null;
  const share = usage.size ? Math.min(1, usage.used / usage.size) : 0;
  const meta = usage.meta;
  const detail = meta
    ? `input ${meta.inputTokens} (+${meta.cachedInputTokens} cached), output ${meta.outputTokens} in the last request`
    : '';
  return html`<div class="usage" title=${`Context: ${usage.used} of ${usage.size} tokens. ${detail}`}>
    <span class="meter"><span class=${`fill${share > 0.8 ? ' high' : ''}`} style=${{ width: `${(share * 100).toFixed(1)}%` }}></span></span>
    <span>${tokens(usage.used)} / ${tokens(usage.size)}</span>
    ${usage.cost ? html`<span class="cost">${money(usage.cost.amount, usage.cost.currency)}</span>` : null}
  </div>`;
}

export function Header({ view }) {
  const modes = view.modes;
  return html`<header class="bar">
    <button type="button" class="menu" title="Sessions" onClick=${() => { store.state.sidebar = !store.state.sidebar; store.changed(); }}>☰</button>
    <div class="title">
      <strong>${view.title || 'New session'}</strong>
      <span class="muted mono" title=${view.cwd}>${view.cwd}</span>
    </div>
    <div class="controls">
      ${modes?.availableModes?.length ? html`<label class="picker" title="When dsh asks before it changes something">
        <span>Mode</span>
        <select data-option="mode" value=${modes.currentModeId} onChange=${(e) => setMode(view, e.currentTarget.value)}>
          ${modes.availableModes.map((m) => html`<option value=${m.id} title=${m.description ?? ''}>${m.name}</option>`)}
        </select>
      </label>` : null}
      ${view.options.filter((o) => o.type === 'select').map((o) => html`<${OptionPicker} key=${o.id} view=${view} option=${o} />`)}
      <${Usage} usage=${view.usage} />
    </div>
  </header>`;
}
