//! Property tests: the SSE parser does not care where reads split the stream, and garbage
//! never panics.

#![allow(clippy::unwrap_used)]

use dsh_llm_http::{SseEvent, SseParser};
use dsh_testkit::split_reads;
use proptest::prelude::*;

/// Feeds `bytes` in pieces cut at `cuts` (positions, any order, may repeat).
fn parse_split(bytes: &[u8], cuts: &[usize]) -> Result<Vec<SseEvent>, String> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for read in split_reads(bytes, cuts) {
        parser.feed(read, &mut out).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn line_end() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r"), Just("\r\n")]
}

/// An event: data lines (no line breaks inside), optional comment and ignored fields.
fn event() -> impl Strategy<Value = (Vec<String>, bool, bool)> {
    (
        prop::collection::vec("[^\r\n]{0,12}", 1..4),
        any::<bool>(),
        any::<bool>(),
    )
}

fn render(events: &[(Vec<String>, bool, bool)], ends: &[&'static str]) -> (Vec<u8>, Vec<String>) {
    let mut out = String::new();
    let mut expected = Vec::new();
    let mut cycle = ends.iter().cycle();
    let mut previous = "";
    // Line ends are mixed freely, except that a CR followed by an LF end would read as one
    // CRLF; such a pair is written as CR + CRLF instead, which still ends two lines.
    let mut end = move || {
        let mut next = *cycle.next().expect("`ends` is never empty");
        if previous == "\r" && next == "\n" {
            next = "\r\n";
        }
        previous = next;
        next
    };
    for (lines, comment, fields) in events {
        if *comment {
            out.push_str(": keep-alive");
            out.push_str(end());
        }
        if *fields {
            out.push_str("event: message");
            out.push_str(end());
            out.push_str("id: 42");
            out.push_str(end());
        }
        for line in lines {
            out.push_str("data: ");
            out.push_str(line);
            out.push_str(end());
        }
        out.push_str(end());
        expected.push(lines.join("\n"));
    }
    (out.into_bytes(), expected)
}

proptest! {
    #[test]
    fn well_formed_streams_yield_the_same_events_whatever_the_split(
        events in prop::collection::vec(event(), 0..8),
        ends in prop::collection::vec(line_end(), 1..4),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (bytes, expected) = render(&events, &ends);
        let whole = parse_split(&bytes, &[]).unwrap();
        let split = parse_split(&bytes, &cuts).unwrap();
        let data: Vec<String> = whole.iter().map(|e| e.data.clone()).collect();
        prop_assert_eq!(&data, &expected);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn garbage_never_panics_and_parses_the_same_whatever_the_split(
        bytes in prop::collection::vec(
            prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '),
                Just(b'd'), Just(b'a'), Just(b't'), any::<u8>()
            ],
            0..256,
        ),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = parse_split(&bytes, &[]);
        let split = parse_split(&bytes, &cuts);
        prop_assert_eq!(whole, split);
    }
}
