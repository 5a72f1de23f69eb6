// Markdown (the CommonMark subset models write, plus GFM tables and strikethrough) to Preact
// nodes. It builds nodes, never HTML strings: whatever a model writes (`<script>`, an
// `onerror=`, a `javascript:` link) is text on screen, so the page needs no sanitiser. It runs
// on every frame of a streaming answer, so it is one linear pass; an unfinished code fence is
// shown as a code block until it closes.
import { h } from '../vendor/preact.module.js';
import { highlight } from './highlight.js';

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

export function markdown(text) {
  return blocks(text.replace(/\r\n?/g, '\n').split('\n'));
}

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line) ||
    (line.includes('|') && next !== undefined && TABLE_RULE.test(next) && next.includes('-'));
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !(lines[i].trimStart().startsWith(fence) && !lines[i].trim().slice(fence.length).trim())) {
        body.push(lines[i]);
        i++;
      }
      i++;
      out.push(codeBlock(body.join('\n'), m[2]));
    } else if ((m = HEADING.exec(line))) {
      out.push(h(`h${m[1].length}`, null, inline(m[2] ?? '')));
      i++;
    } else if (RULE.test(line)) {
      out.push(h('hr', null));
      i++;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || body.length)) {
        body.push(lines[i].replace(QUOTE, ''));
        i++;
      }
      out.push(h('blockquote', null, blocks(body)));
    } else if (ITEM.test(line)) {
      i = list(lines, i, out);
    } else if (line.includes('|') && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      i = table(lines, i, out);
    } else {
      const body = [line];
      i++;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i], lines[i + 1])) {
        body.push(lines[i]);
        i++;
      }
      out.push(h('p', null, inline(body.join('\n'))));
    }
  }
  return out;
}

function list(lines, i, out) {
  const first = ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const indent = first[1].length;
  const items = [];
  let loose = false;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const offset = m[1].length + m[2].length + Math.min(m[3].length || 1, 4);
    const body = [m[4]];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        // A blank line continues the item only if indented content follows.
        const next = lines[i + 1];
        if (next !== undefined && next.trim() && /^\s*/.exec(next)[0].length >= offset) {
          body.push('');
          loose = true;
          i++;
          continue;
        }
        break;
      }
      const lead = /^\s*/.exec(line)[0].length;
      if (lead >= offset) body.push(line.slice(offset));
      else if (!ITEM.test(line) && !startsBlock(line, lines[i + 1])) body.push(line.trim());
      else if (lead > indent && ITEM.test(line)) body.push(line.slice(Math.min(lead, offset)));
      else break;
      i++;
    }
    items.push(body);
    // A blank line between items makes the list loose.
    const next = i < lines.length && !lines[i].trim() ? ITEM.exec(lines[i + 1] ?? '') : null;
    if (next && next[1].length === indent && /\d/.test(next[2]) === ordered) {
      loose = true;
      i++;
    }
  }
  const children = items.map((body) => {
    const content = blocks(body);
    // A tight item's lone paragraph is shown without the paragraph's margins.
    const tight = !loose && content.length && content[0].type === 'p' ? [content[0].props.children, ...content.slice(1)] : content;
    return h('li', null, tight);
  });
  const start = ordered ? parseInt(first[2], 10) : 1;
  out.push(ordered ? h('ol', start !== 1 ? { start } : null, children) : h('ul', null, children));
  return i;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function table(lines, i, out) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : null));
  i += 2;
  const rows = [];
  while (i < lines.length && lines[i].trim() && lines[i].includes('|')) {
    rows.push(cells(lines[i]));
    i++;
  }
  const cell = (tag, text, k) => h(tag, align[k] ? { class: `align-${align[k]}` } : null, inline(text ?? ''));
  out.push(h('div', { class: 'table-wrap' }, h('table', null,
    h('thead', null, h('tr', null, head.map((c, k) => cell('th', c, k)))),
    h('tbody', null, rows.map((r) => h('tr', null, head.map((_, k) => cell('td', r[k], k))))))));
  return i;
}

function copy(event) {
  const code = event.currentTarget.closest('.code')?.querySelector('code')?.textContent ?? '';
  navigator.clipboard?.writeText(code).catch(() => {});
}

export function codeBlock(code, lang) {
  return h('div', { class: 'code' },
    h('div', { class: 'code-head' }, h('span', null, lang || 'text'), h('button', { class: 'copy', type: 'button', onClick: copy, title: 'Copy' }, 'copy')),
    h('pre', null, h('code', { class: lang ? `lang-${lang}` : null }, highlight(code, lang))));
}

// Links are followed only to the web and mail; anything else is shown as text.
function safeUrl(url) {
  return /^(https?:|mailto:)/i.test(url) ? url : null;
}

function link(label, url, source) {
  const href = safeUrl(url);
  if (!href) return source;
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label);
}

// One pattern of every inline form; each call compiles its own, since calls nest.
const INLINE = [
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source, // 1,2 code span
  /<(https?:\/\/[^>\s]+)>/.source, // 3 autolink
  /\[([^\]\n]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/.source, // 4,5 link
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 6 strong
  /__(?=\S)([\s\S]*?\S)__(?!\w)/.source, // 7 strong
  /~~(?=\S)([\s\S]*?\S)~~/.source, // 8 strikethrough
  /\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/.source, // 9 emphasis
  /(?<!\w)_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/.source, // 10 emphasis
  /(https?:\/\/[^\s<]*[^\s<.,:;"')\]])/.source, // 11 bare URL
  /(?: {2,}|\\)\n/.source, // hard line break
].join('|');

export function inline(text) {
  const out = [];
  let last = 0;
  const re = new RegExp(INLINE, 'g');
  let m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[2] !== undefined) out.push(h('code', null, m[2].length > 1 && m[2].startsWith(' ') && m[2].endsWith(' ') ? m[2].slice(1, -1) : m[2]));
    else if (m[3] !== undefined) out.push(link(m[3], m[3], m[0]));
    else if (m[4] !== undefined) out.push(link(inline(m[4]), m[5], m[0]));
    else if (m[6] !== undefined || m[7] !== undefined) out.push(h('strong', null, inline(m[6] ?? m[7])));
    else if (m[8] !== undefined) out.push(h('del', null, inline(m[8])));
    else if (m[9] !== undefined || m[10] !== undefined) out.push(h('em', null, inline(m[9] ?? m[10])));
    else if (m[11] !== undefined) out.push(link(m[11], m[11], m[0]));
    else out.push(h('br', null));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
