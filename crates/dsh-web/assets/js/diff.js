// Unified diffs for the edit cards: the lines an edit removes and adds, with three lines of
// context around each change, computed in the page from the call's old and new text (ACP
// `diff` content). Myers' algorithm on what lies between the common head and tail; a change
// too large to compare line by line is shown as all old lines out, all new lines in.

const CONTEXT = 3;
const MAX_EDIT = 2000;

function lines(text) {
  if (!text) return [];
  const parts = text.split('\n');
  if (parts[parts.length - 1] === '') parts.pop();
  return parts;
}

// The edit script between a and b as [op, line] pairs, op one of ' ', '-', '+'.
function script(a, b) {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const middle = myers(x, y) ?? [...x.map((l) => ['-', l]), ...y.map((l) => ['+', l])];
  return [...a.slice(0, head).map((l) => [' ', l]), ...middle, ...a.slice(a.length - tail).map((l) => [' ', l])];
}

function myers(a, b) {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, MAX_EDIT);
  const v = new Int32Array(2 * max + 2);
  const trace = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[max + k - 1] < v[max + k + 1]) ? v[max + k + 1] : v[max + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[max + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, max, d);
    }
  }
  return null;
}

function backtrack(trace, a, b, max, dEnd) {
  const out = [];
  let x = a.length;
  let y = b.length;
  for (let d = dEnd; d > 0; d--) {
    const v = trace[d];
    const k = x - y;
    const prevK = k === -d || (k !== d && v[max + k - 1] < v[max + k + 1]) ? k + 1 : k - 1;
    const prevX = v[max + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) out.push([' ', a[--x]]) && y--;
    if (x === prevX) out.push(['+', b[--y]]);
    else out.push(['-', a[--x]]);
  }
  while (x > 0 && y > 0) out.push([' ', a[--x]]) && y--;
  return out.reverse();
}

// Hunks of a unified diff: [{oldStart, newStart, lines: [[op, text, oldNo, newNo]]}].
export function unified(oldText, newText) {
  const ops = script(lines(oldText), lines(newText));
  let o = 1;
  let nn = 1;
  const numbered = ops.map(([op, text]) => {
    const row = [op, text, op === '+' ? null : o, op === '-' ? null : nn];
    if (op !== '+') o++;
    if (op !== '-') nn++;
    return row;
  });
  const hunks = [];
  let hunk = null;
  numbered.forEach((row, i) => {
    if (row[0] === ' ') return;
    const from = Math.max(0, i - CONTEXT);
    if (hunk && from <= hunk.end) {
      for (let j = hunk.end; j <= i; j++) hunk.lines.push(numbered[j]);
    } else {
      if (hunk) finish(hunk, numbered);
      hunk = { lines: numbered.slice(from, i + 1) };
    }
    hunk.end = i + 1;
  });
  if (hunk) finish(hunk, numbered);
  return hunks;

  function finish(h, all) {
    const stop = Math.min(all.length, h.end + CONTEXT);
    for (let j = h.end; j < stop; j++) h.lines.push(all[j]);
    const first = h.lines[0];
    h.oldStart = first[2] ?? first[3];
    h.newStart = first[3] ?? first[2];
    delete h.end;
    hunks.push(h);
  }
}
