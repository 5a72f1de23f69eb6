//! Syntax highlighting of code blocks and diffs (syntect with bat's syntaxes from
//! `two-face`), kept off the render path's hot loop.
//!
//! - **Loaded in the background.** The syntax set takes tens of milliseconds to load, so
//!   [`load_in_background`] starts it on a thread at start-up; until it is ready code stays
//!   plain, and [`generation`] changes once when it becomes ready, so cached rows are rebuilt
//!   once (cells key their caches on it).
//! - **Highlighted once per block, off the render path.** [`highlight`] answers from a cache
//!   keyed by the block's language and text; a block not highlighted yet is drawn plain this
//!   frame and queued for a background thread, newest first (what is on screen is what was
//!   laid out last). The thread bumps [`generation`] when it has done a frame's worth of work
//!   or the queue is empty, and [`changes`] wakes the UI to redraw. So re-wrapping at another
//!   width, re-rendering a streaming answer whose earlier blocks did not change, or opening a
//!   long session never highlights on the UI's thread, and no block is highlighted twice.
//!   Only closed blocks are highlighted (the markdown renderer leaves a block that is still
//!   streaming plain), so a growing answer does not queue a block per delta.
//! - **Bounded.** Blocks over [`MAX_BYTES`] or [`MAX_LINES`] stay plain (as Codex does), and
//!   the cache forgets everything past [`CACHE_ENTRIES`] blocks.
//! - **Colours.** Syntax themes are RGB; where the terminal does not say it takes 24-bit
//!   colour (`COLORTERM=truecolor|24bit`) each colour is mapped to the nearest of the 16 named
//!   ones, which follow the terminal's palette. `NO_COLOR` strips them with every other colour.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use ratatui::style::{Color, Modifier, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::{SyntaxReference, SyntaxSet};

/// Larger blocks stay plain.
pub const MAX_BYTES: usize = 512 * 1024;
/// Longer blocks stay plain.
pub const MAX_LINES: usize = 10_000;
/// Highlighted blocks remembered at most.
pub const CACHE_ENTRIES: usize = 4096;

/// One highlighted line: styled pieces of its text.
pub type StyledLine = Vec<(Style, String)>;

struct Highlighter {
    syntaxes: SyntaxSet,
    theme: Theme,
    truecolor: bool,
}

static HIGHLIGHTER: OnceLock<Highlighter> = OnceLock::new();
static GENERATION: AtomicU64 = AtomicU64::new(0);
static CHANGES: OnceLock<tokio::sync::watch::Sender<u64>> = OnceLock::new();
static WORK: OnceLock<Work> = OnceLock::new();

/// After this much highlighting the worker publishes what it has (one relayout).
const BATCH: Duration = Duration::from_millis(30);

/// Blocks waiting to be highlighted, newest last.
#[derive(Default)]
struct Work {
    queue: Mutex<Vec<(u64, String, String)>>,
    queued: Mutex<HashSet<u64>>,
    wake: Condvar,
    idle: Condvar,
}
/// Highlighted blocks by a hash of (language, text); `None`: it cannot be highlighted.
type Cache = Mutex<HashMap<u64, Option<Arc<Vec<StyledLine>>>>>;
static CACHE: OnceLock<Cache> = OnceLock::new();

fn load() -> &'static Highlighter {
    HIGHLIGHTER.get_or_init(|| {
        let themes = ThemeSet::load_defaults();
        let theme = themes
            .themes
            .get("base16-ocean.dark")
            .or_else(|| themes.themes.values().next())
            .cloned()
            .unwrap_or_default();
        let truecolor = std::env::var("COLORTERM")
            .is_ok_and(|v| v.eq_ignore_ascii_case("truecolor") || v.eq_ignore_ascii_case("24bit"));
        let h = Highlighter {
            syntaxes: two_face::syntax::extra_newlines(),
            theme,
            truecolor,
        };
        bump();
        h
    })
}

fn bump() {
    let g = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    if let Some(tx) = CHANGES.get() {
        tx.send_replace(g);
    }
}

fn work() -> &'static Work {
    WORK.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("dsh-highlight".into())
            .spawn(worker);
        Work::default()
    })
}

/// Highlights queued blocks, newest first, publishing every [`BATCH`] and when done.
fn worker() {
    let h = load();
    let work = work();
    let mut since = Instant::now();
    let mut done = 0usize;
    loop {
        let next = {
            let mut queue = work.queue.lock();
            while queue.is_empty() {
                if done > 0 {
                    bump();
                    done = 0;
                }
                work.idle.notify_all();
                work.wake.wait(&mut queue);
                since = Instant::now();
            }
            queue.pop()
        };
        let Some((key, lang, code)) = next else {
            continue;
        };
        let lines = syntax_for(h, &lang)
            .and_then(|syntax| highlight_with(h, syntax, &code))
            .map(Arc::new);
        remember(key, lines);
        work.queued.lock().remove(&key);
        done += 1;
        if since.elapsed() >= BATCH {
            bump();
            done = 0;
            since = Instant::now();
        }
    }
}

fn remember(key: u64, lines: Option<Arc<Vec<StyledLine>>>) {
    let mut cache = CACHE.get_or_init(Mutex::default).lock();
    if cache.len() >= CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(key, lines);
}

/// A receiver that changes whenever [`generation`] does (the UI redraws then).
pub fn changes() -> tokio::sync::watch::Receiver<u64> {
    CHANGES
        .get_or_init(|| tokio::sync::watch::channel(generation()).0)
        .subscribe()
}

/// Waits until every queued block is highlighted (benchmarks and tests; the UI never waits).
pub fn settle() {
    let work = work();
    let mut queue = work.queue.lock();
    while !queue.is_empty() || !work.queued.lock().is_empty() {
        work.idle.wait(&mut queue);
    }
}

/// Starts loading the syntaxes on a thread of its own (the UI calls it at start-up).
pub fn load_in_background() {
    if HIGHLIGHTER.get().is_none() {
        let _ = std::thread::Builder::new()
            .name("dsh-highlight".into())
            .spawn(|| {
                load();
            });
    }
}

/// Loads the syntaxes now, on this thread (benchmarks and tests that want colours at once).
pub fn load_now() {
    load();
}

/// Changes once, when highlighting becomes available; part of every cached row's key.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// `code` in language `lang` (a fence's info string or a file extension), highlighted, or
/// `None` while the syntaxes load, while the block waits its turn in the background (it is
/// queued now), for an unknown language, or for a block too large.
pub fn highlight(lang: &str, code: &str) -> Option<Arc<Vec<StyledLine>>> {
    let h = HIGHLIGHTER.get()?;
    if code.len() > MAX_BYTES || code.lines().count() > MAX_LINES {
        return None;
    }
    // An unknown language is known at once (and never queued).
    syntax_for(h, lang)?;
    let key = {
        let mut hasher = DefaultHasher::new();
        lang.hash(&mut hasher);
        code.hash(&mut hasher);
        hasher.finish()
    };
    if let Some(hit) = CACHE.get_or_init(Mutex::default).lock().get(&key) {
        return hit.clone();
    }
    let work = work();
    if work.queued.lock().insert(key) {
        work.queue
            .lock()
            .push((key, lang.to_owned(), code.to_owned()));
        work.wake.notify_one();
    }
    None
}

fn syntax_for<'a>(h: &'a Highlighter, lang: &str) -> Option<&'a SyntaxReference> {
    let lang = lang.split([',', ' ', '{']).next().unwrap_or("").trim();
    if lang.is_empty() {
        return None;
    }
    h.syntaxes
        .find_syntax_by_token(lang)
        .or_else(|| h.syntaxes.find_syntax_by_extension(lang))
}

fn highlight_with(
    h: &Highlighter,
    syntax: &SyntaxReference,
    code: &str,
) -> Option<Vec<StyledLine>> {
    let mut lines = HighlightLines::new(syntax, &h.theme);
    let mut out = Vec::new();
    for line in syntect::util::LinesWithEndings::from(code) {
        let ranges = lines.highlight_line(line, &h.syntaxes).ok()?;
        let styled = ranges
            .into_iter()
            .map(|(style, text)| {
                let text = text.trim_end_matches(['\n', '\r']).to_owned();
                (convert(style, h.truecolor), text)
            })
            .filter(|(_, text)| !text.is_empty())
            .collect();
        out.push(styled);
    }
    Some(out)
}

fn convert(style: syntect::highlighting::Style, truecolor: bool) -> Style {
    let c = style.foreground;
    let fg = if truecolor {
        Color::Rgb(c.r, c.g, c.b)
    } else {
        nearest_named(c.r, c.g, c.b)
    };
    let mut out = Style::new().fg(fg);
    if style.font_style.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if style.font_style.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    out
}

/// The named colour nearest to an RGB one (xterm's default palette as the reference).
fn nearest_named(r: u8, g: u8, b: u8) -> Color {
    const PALETTE: [(Color, [i32; 3]); 14] = [
        (Color::Red, [205, 0, 0]),
        (Color::Green, [0, 205, 0]),
        (Color::Yellow, [205, 205, 0]),
        (Color::Blue, [0, 0, 238]),
        (Color::Magenta, [205, 0, 205]),
        (Color::Cyan, [0, 205, 205]),
        (Color::Gray, [229, 229, 229]),
        (Color::DarkGray, [127, 127, 127]),
        (Color::LightRed, [255, 0, 0]),
        (Color::LightGreen, [0, 255, 0]),
        (Color::LightYellow, [255, 255, 0]),
        (Color::LightBlue, [92, 92, 255]),
        (Color::LightMagenta, [255, 0, 255]),
        (Color::LightCyan, [0, 255, 255]),
    ];
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    PALETTE
        .iter()
        .min_by_key(|(_, [pr, pg, pb])| (pr - r).pow(2) + (pg - g).pow(2) + (pb - b).pow(2))
        .map_or(Color::Reset, |(c, _)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_language_is_highlighted_once_and_the_text_is_kept() {
        load_now();
        let code = "fn main() {\n    let x = 1;\n}\n";
        assert!(
            highlight("rust", code).is_none(),
            "queued, not done on this thread"
        );
        settle();
        let first = highlight("rust", code).expect("rust is known");
        let text: Vec<String> = first
            .iter()
            .map(|l| l.iter().map(|(_, t)| t.as_str()).collect())
            .collect();
        assert_eq!(text, ["fn main() {", "    let x = 1;", "}"]);
        let styles: std::collections::HashSet<_> =
            first.iter().flatten().map(|(s, _)| *s).collect();
        assert!(styles.len() > 1, "more than one colour: {styles:?}");
        let again = highlight("rust", code).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the second ask is the cache");
        assert!(highlight("no-such-language", code).is_none());
        let _ = highlight("rs", code);
        settle();
        assert!(
            highlight("rs", code).is_some(),
            "extensions name languages too"
        );
    }

    #[test]
    fn colours_map_to_named_ones_without_truecolor() {
        assert_eq!(nearest_named(200, 10, 10), Color::Red);
        assert_eq!(nearest_named(120, 120, 130), Color::DarkGray);
    }
}
