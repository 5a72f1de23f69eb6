// A small syntax highlighter for code blocks: comments, strings, numbers, keywords and
// called names, for the languages an agent usually shows. It returns Preact nodes (spans
// with classes), never HTML, so nothing in the code can become markup.
import { h } from '../vendor/preact.module.js';

const C_LIKE = { line: ['//'], block: [['/*', '*/']], quotes: ['"', "'", '`'] };
const HASH = { line: ['#'], block: [], quotes: ['"', "'"] };

const words = (s) => new Set(s.split(' '));

const LANGS = {
  rust: { ...C_LIKE, quotes: ['"'], keywords: words('as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err') },
  js: { ...C_LIKE, keywords: words('async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield') },
  ts: null, // js plus types, below
  go: { ...C_LIKE, keywords: words('break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var') },
  c: { ...C_LIKE, quotes: ['"', "'"], keywords: words('auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while NULL true false class namespace public private protected template typename virtual new delete nullptr this using') },
  java: { ...C_LIKE, quotes: ['"', "'"], keywords: words('abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new null package private protected public return short static super switch this throw throws true false try void while var val fun') },
  python: { ...HASH, keywords: words('and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self') },
  sh: { ...HASH, keywords: words('if then else elif fi for while until do done case esac function in export local return exit set unset cd echo sudo') },
  json: { line: [], block: [], quotes: ['"'], keywords: words('true false null') },
  toml: { ...HASH, keywords: words('true false') },
  yaml: { ...HASH, keywords: words('true false null yes no') },
  sql: { line: ['--'], block: [['/*', '*/']], quotes: ["'", '"'], keywords: words('select from where and or not insert into values update set delete create table drop alter index join left right inner outer on group by order having limit as null is in exists distinct union all primary key references') },
};
LANGS.ts = { ...LANGS.js, keywords: new Set([...LANGS.js.keywords, ...words('interface type enum implements private public protected readonly keyof as any number string boolean never unknown')]) };

const ALIASES = {
  rs: 'rust', javascript: 'js', jsx: 'js', mjs: 'js', typescript: 'ts', tsx: 'ts', golang: 'go',
  cpp: 'c', 'c++': 'c', h: 'c', hpp: 'c', cc: 'c', cs: 'java', csharp: 'java', kotlin: 'java', kt: 'java', swift: 'java', scala: 'java',
  py: 'python', bash: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', shellsession: 'sh', dockerfile: 'sh', make: 'sh', makefile: 'sh',
  yml: 'yaml', jsonc: 'json', json5: 'json', ini: 'toml', cfg: 'toml', postgres: 'sql', postgresql: 'sql',
};

// Longer code is shown plain: highlighting it would cost more than it helps.
const LIMIT = 60000;

function diffLines(code) {
  return code.split('\n').flatMap((line, i) => {
    const cls = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : null;
    const nodes = cls ? [h('span', { class: `tok-${cls}` }, line)] : [line];
    return i ? ['\n', ...nodes] : nodes;
  });
}

export function highlight(code, lang) {
  const name = (lang || '').toLowerCase();
  if (name === 'diff' || name === 'patch') return diffLines(code);
  const key = ALIASES[name] ?? name;
  const spec = LANGS[key];
  if (!spec || code.length > LIMIT) return [code];
  const out = [];
  let plain = '';
  const flush = () => {
    if (plain) out.push(plain);
    plain = '';
  };
  const span = (cls, text) => {
    flush();
    out.push(h('span', { class: `tok-${cls}` }, text));
  };
  const n = code.length;
  let i = 0;
  outer: while (i < n) {
    const ch = code[i];
    for (const [open, close] of spec.block) {
      if (code.startsWith(open, i)) {
        const end = code.indexOf(close, i + open.length);
        const stop = end < 0 ? n : end + close.length;
        span('com', code.slice(i, stop));
        i = stop;
        continue outer;
      }
    }
    for (const marker of spec.line) {
      // A shell `#` starts a comment only where a word starts (not in `$#` or `a#b`).
      if (code.startsWith(marker, i) && (marker !== '#' || i === 0 || /\s/.test(code[i - 1]))) {
        const end = code.indexOf('\n', i);
        const stop = end < 0 ? n : end;
        span('com', code.slice(i, stop));
        i = stop;
        continue outer;
      }
    }
    if (spec.quotes.includes(ch)) {
      let j = i + 1;
      while (j < n && code[j] !== ch && (ch === '`' || code[j] !== '\n')) j += code[j] === '\\' ? 2 : 1;
      const stop = Math.min(n, j + 1);
      span('str', code.slice(i, stop));
      i = stop;
      continue;
    }
    if (/[0-9]/.test(ch) && (i === 0 || !/[\w$]/.test(code[i - 1]))) {
      const m = /^[0-9][\w.]*/.exec(code.slice(i, i + 64));
      span('num', m[0]);
      i += m[0].length;
      continue;
    }
    if (/[A-Za-z_$]/.test(ch) && (i === 0 || !/[\w$]/.test(code[i - 1]))) {
      const m = /^[A-Za-z_$][\w$]*/.exec(code.slice(i, i + 128));
      const word = m[0];
      if (spec.keywords.has(key === 'sql' ? word.toLowerCase() : word)) span('kw', word);
      else if (code[i + word.length] === '(' || code[i + word.length] === '!') span('fn', word);
      else plain += word;
      i += word.length;
      continue;
    }
    plain += ch;
    i++;
  }
  flush();
  return out;
}
