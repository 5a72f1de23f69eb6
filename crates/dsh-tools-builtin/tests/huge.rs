//! `read` on files far larger than what it shows: correct excerpts near the end, and memory
//! bounded by the excerpt rather than the file. Memory is measured as the peak resident set
//! of a child process that does nothing else, so parallel tests cannot disturb the figure.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

/// Lines of the large file; every line is exactly 64 bytes, so the file is 64 MiB.
const LINES: u64 = 1 << 20;
const LINE_BYTES: usize = 64;
/// A single line this long (no newline in it) must not be loaded whole either.
const ONE_LINE_BYTES: usize = 32 << 20;
/// Peak resident memory the reading process may reach. Well below either file's size, well
/// above what a test binary with a tokio runtime needs.
const PEAK_LIMIT_KIB: u64 = 40 * 1024;

fn line(i: u64) -> String {
    let head = format!("line {i} ");
    format!("{head}{}\n", "x".repeat(LINE_BYTES - head.len() - 1))
}

fn write_large(path: &Path) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 1..=LINES {
        out.write_all(line(i).as_bytes()).unwrap();
    }
    out.flush().unwrap();
}

fn write_one_long_line(path: &Path) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let chunk = vec![b'y'; 1 << 20];
    for _ in 0..ONE_LINE_BYTES >> 20 {
        out.write_all(&chunk).unwrap();
    }
    out.write_all(b"\nend\n").unwrap();
    out.flush().unwrap();
}

/// Peak resident set size of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs only inside the child process spawned below.
#[tokio::test]
#[ignore = "helper process: run by reading_near_the_end_of_a_huge_file_is_exact_and_keeps_memory_bounded"]
async fn huge_file_helper() {
    assert!(
        std::env::var_os("BUILTIN_HUGE_HELPER").is_some(),
        "a helper process: run by reading_near_the_end_of_a_huge_file_is_exact_and_keeps_memory_bounded"
    );
    let w = world().await;
    let dir = tempdir();
    write_large(&dir.path().join("large.txt"));
    write_one_long_line(&dir.path().join("long-line.txt"));
    let a = w.caller_in("session-a", Some(dir.path()));

    let near_end = w
        .call(
            "read",
            json!({"file_path": "large.txt", "offset": LINES - 2}),
            Some(&a),
        )
        .await;
    let expected_lines: String = (LINES - 2..=LINES)
        .map(|i| format!("{i}: {}", line(i)))
        .collect();
    assert_eq!(
        near_end.text(),
        format!(
            "<path>large.txt</path>\n<type>file</type>\n<content>\n{expected_lines}\n\
             (End of file - total {LINES} lines)\n</content>"
        )
    );

    let middle = w
        .call(
            "read",
            json!({"file_path": "large.txt", "offset": 500_000, "limit": 2}),
            Some(&a),
        )
        .await;
    assert!(
        middle.text().ends_with(&format!(
            "(Showing lines 500000-500001 of {LINES}. Use offset=500002 to continue.)\n</content>"
        )),
        "{}",
        middle.text()
    );

    let long = w
        .call("read", json!({"file_path": "long-line.txt"}), Some(&a))
        .await;
    assert_eq!(
        long.text(),
        format!(
            "<path>long-line.txt</path>\n<type>file</type>\n<content>\n\
             1: {}... (line truncated to 2000 chars)\n2: end\n\n\
             (End of file - total 2 lines)\n</content>",
            "y".repeat(2000)
        )
    );

    let peak = peak_rss_kib();
    println!("peak resident memory: {peak} KiB");
    assert!(
        peak < PEAK_LIMIT_KIB,
        "reading used {peak} KiB at peak (limit {PEAK_LIMIT_KIB} KiB)"
    );
    w.shutdown().await;
}

#[test]
fn reading_near_the_end_of_a_huge_file_is_exact_and_keeps_memory_bounded() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "huge_file_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BUILTIN_HUGE_HELPER", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the helper did not run:\n{stdout}"
    );
}
