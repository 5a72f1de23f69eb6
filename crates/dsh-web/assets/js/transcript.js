// The conversation: the person's messages, the agent's answers (Markdown), its reasoning
// (collapsed), and a card per tool call with its output and diffs.
//
// A long session is thousands of items, so the transcript shows the newest ones and adds
// older ones in pages as the reader nears the top (keeping what is on screen in place), and
// every item is memoised on its revision: a streaming answer re-renders one item per frame.
import { useState, useRef, useEffect, useLayoutEffect } from '../vendor/hooks.module.js';
import { html, memo } from './util.js';
import { markdown } from './markdown.js';
import { unified } from './diff.js';

// Items drawn when a session opens, and added per page as the reader nears the top: small
// enough that drawing a page stays a short task (each item is Markdown to parse and lay out).
const FIRST = 18;
const PAGE = 12;

const STATUS = { pending: '○', in_progress: '◐', completed: '✓', failed: '✗' };

function Diff({ block }) {
  const hunks = unified(block.oldText ?? '', block.newText ?? '');
  return html`<div class="diff">
    <div class="diff-path">${block.oldText == null ? 'new file ' : ''}${block.path}</div>
    ${hunks.length ? hunks.map((hunk) => html`<table class="hunk">
      <tbody>${hunk.lines.map(([op, text, o, n]) => html`<tr class=${op === '+' ? 'add' : op === '-' ? 'del' : 'ctx'}>
        <td class="ln">${o ?? ''}</td><td class="ln">${n ?? ''}</td><td class="op">${op}</td><td class="text">${text}</td>
      </tr>`)}</tbody>
    </table>`) : html`<p class="muted">no change</p>`}
  </div>`;
}

export function ContentBlocks({ content }) {
  return (content ?? []).map((block, i) => {
    if (block.type === 'diff') return html`<${Diff} key=${i} block=${block} />`;
    if (block.type === 'content' && block.content?.type === 'text') {
      return html`<div class="md" key=${i}>${markdown(block.content.text)}</div>`;
    }
    if (block.type === 'terminal') return html`<p class="muted" key=${i}>(terminal ${block.terminalId})</p>`;
    return null;
  });
}

// The command a call runs, when its input names one (shown on the card's face).
export function commandOf(item) {
  return typeof item.rawInput?.command === 'string' ? item.rawInput.command : null;
}

function ToolCard({ item }) {
  const [open, setOpen] = useState(true);
  const status = item.status ?? 'pending';
  const command = commandOf(item);
  return html`<div class=${`tool ${status}`} data-tool=${item.id} data-status=${status}>
    <button type="button" class="tool-head" onClick=${() => setOpen(!open)} aria-expanded=${open}>
      <span class="tool-status" title=${status}>${STATUS[status] ?? '○'}</span>
      <span class="tool-kind">${item.toolKind ?? 'tool'}</span>
      <span class=${`tool-title${item.toolKind === 'execute' ? ' mono' : ''}`}>${item.title || 'tool call'}</span>
    </button>
    ${open && ((command && command !== item.title) || item.content?.length) ? html`<div class="tool-body">
      ${command && command !== item.title ? html`<pre class="command">$ ${command}</pre>` : null}
      <${ContentBlocks} content=${item.content} />
    </div>` : null}
  </div>`;
}

function Thought({ item }) {
  const first = item.text.trim().split('\n')[0].slice(0, 120);
  return html`<details class="thought">
    <summary>Thinking <span class="muted">${first}</span></summary>
    <div class="md">${markdown(item.text)}</div>
  </details>`;
}

function Item({ item }) {
  switch (item.kind) {
    case 'user':
      return html`<div class=${`msg user${item.steer ? ' steer' : ''}`}>${item.steer ? html`<span class="tag">steer</span>` : null}${item.text}</div>`;
    case 'agent':
      return html`<div class="msg agent md">${markdown(item.text)}</div>`;
    case 'thought':
      return html`<${Thought} item=${item} />`;
    case 'tool':
      return html`<${ToolCard} item=${item} />`;
    case 'note':
      return html`<div class=${`note${item.error ? ' error' : ''}`}>${item.text}</div>`;
    default:
      return null;
  }
}

const MemoItem = memo(Item, (a, b) => a.item === b.item && a.rev === b.rev);

// Items are drawn in blocks of PAGE, aligned on their index, each memoised on its items and
// their revisions: showing a page of older items (or one streamed token) compares a hundred
// blocks, not a thousand items. The blocks are fragments: the items stay the transcript's
// direct children.
function Block({ items, from }) {
  return items.map((item, i) => html`<${MemoItem} key=${from + i} item=${item} rev=${item.rev} />`);
}

const MemoBlock = memo(Block, (a, b) => a.from === b.from && a.items.length === b.items.length
  && a.items.every((item, i) => item === b.items[i] && a.revs[i] === b.revs[i]));

function blocks(items, start) {
  const out = [];
  for (let from = start; from < items.length; from += PAGE) {
    const slice = items.slice(from, from + PAGE);
    out.push(html`<${MemoBlock} key=${from} from=${from} items=${slice} revs=${slice.map((i) => i.rev)} />`);
  }
  return out;
}

export function Transcript({ view }) {
  const [shown, setShown] = useState(FIRST);
  const scroller = useRef(null);
  const stick = useRef(true);
  const anchor = useRef(null);
  const count = view.items.length;
  // While a session loads its replay streams in: it is drawn once, when complete, rather than
  // as a window sliding over thousands of items.
  // Aligned on a block, so the blocks already drawn keep their bounds as older pages come.
  const start = view.loading ? 0 : Math.floor(Math.max(0, count - shown) / PAGE) * PAGE;

  // Older items, added above what is on screen (which stays where it is).
  const more = () => {
    if (anchor.current != null) return;
    const el = scroller.current;
    anchor.current = el.scrollHeight - el.scrollTop;
    setShown((s) => s + PAGE);
  };
  // Follow the bottom while the reader is there; near the top, show older items.
  const onScroll = () => {
    const el = scroller.current;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    if (start > 0 && el.scrollTop < 300) more();
  };
  useLayoutEffect(() => {
    const el = scroller.current;
    if (anchor.current != null) {
      el.scrollTop = el.scrollHeight - anchor.current;
      anchor.current = null;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
    // Too little to scroll yet: show more until there is.
    if (start > 0 && el.scrollHeight <= el.clientHeight) more();
  });
  useEffect(() => {
    setShown(FIRST);
    stick.current = true;
  }, [view.id]);

  return html`<div class="scroll" ref=${scroller} onScroll=${onScroll}>
    <div class="transcript" data-items=${count}>
      ${start > 0 ? html`<button type="button" class="older link" onClick=${more}>${start} earlier items (scroll up or click)</button>` : null}
      ${view.loading ? null : blocks(view.items, start)}
      ${view.loading ? html`<p class="muted">Loading the session…</p>` : null}
      ${view.error ? html`<p class="error">${view.error}</p>` : null}
      ${view.busy ? html`<div class="working"><span class="spinner"></span> Working…</div>` : null}
    </div>
  </div>`;
}
