// Shared helpers: the `html` tag (htm over Preact's h) and small formatting functions.
import { h, Component } from '../vendor/preact.module.js';
import htm from '../vendor/htm.module.js';

export const html = htm.bind(h);

// `Inner` re-rendered only when `equal(old props, new props)` is false (Preact's core has no
// `memo`; that lives in preact/compat, which the page does not ship).
export function memo(Inner, equal) {
  return class Memo extends Component {
    shouldComponentUpdate(next) {
      return !equal(this.props, next);
    }

    render(props) {
      return h(Inner, props);
    }
  };
}

// "3 min ago", "yesterday", a date: how old an ISO-8601 time is, relative to now.
export function ago(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 2 * 86400) return 'yesterday';
  if (s < 7 * 86400) return `${Math.floor(s / 86400)} days ago`;
  return new Date(t).toLocaleDateString();
}

// 12345 -> "12.3k"
export function tokens(n) {
  if (n == null) return '?';
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1)}M`;
}

export function money(amount, currency) {
  if (amount == null) return '';
  const sign = currency === 'USD' || !currency ? '$' : `${currency} `;
  return `${sign}${amount < 0.01 ? amount.toFixed(4) : amount.toFixed(2)}`;
}

// The last path segments of a directory, for a narrow sidebar.
export function shortDir(path) {
  if (!path) return '';
  const parts = path.split('/').filter(Boolean);
  return parts.length <= 2 ? path : `…/${parts.slice(-2).join('/')}`;
}
