//! Load benchmark: `SessionStore::open` + `build_context` on generated 5,000- and
//! 100,000-entry session files (alternating user/assistant messages of about 1 KB, with usage
//! and an occasional tool call). Prints the median in milliseconds.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tau_store::SessionStore;

/// The allocator the `tau` binary uses, so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WORDS: &[&str] = &[
    "the",
    "session",
    "file",
    "holds",
    "entries",
    "that",
    "form",
    "a",
    "tree",
    "of",
    "messages",
    "tool",
    "calls",
    "results",
    "and",
    "summaries",
    "written",
    "one",
    "line",
    "each",
];

fn text(seed: usize, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 16);
    let mut i = seed;
    while s.len() < bytes {
        s.push_str(WORDS[i % WORDS.len()]);
        s.push(if i.is_multiple_of(13) { '\n' } else { ' ' });
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    s
}

fn write_session(path: &Path, entries: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let header = json!({"type":"session","version":3,"id":"0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000",
        "timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/u/work"});
    writeln!(out, "{header}").unwrap();
    let mut parent = serde_json::Value::Null;
    for i in 0..entries {
        let id = format!("{i:08x}");
        let ts = 1_767_225_600_000_i64 + i as i64 * 1000;
        let message = if i.is_multiple_of(2) {
            json!({"role":"user","content":[{"type":"text","text":text(i, 900)}],"timestamp":ts})
        } else {
            let mut content = vec![
                json!({"type":"thinking","thinking":text(i + 1, 200),"thinkingSignature":"sig"}),
                json!({"type":"text","text":text(i, 1100)}),
            ];
            if i % 10 == 1 {
                content.push(
                    json!({"type":"toolCall","id":format!("call_{i}"),"name":"bash",
                    "arguments":{"command":"ls -la src","timeout":30}}),
                );
            }
            json!({"role":"assistant","content":content,"api":"anthropic-messages",
                "provider":"anthropic","model":"claude-sonnet-4-5",
                "usage":{"input":1200 + i,"output":350,"cacheRead":9000,"cacheWrite":120,
                    "totalTokens":10670 + i,"cost":{"input":0.0036,"output":0.00525,
                    "cacheRead":0.0027,"cacheWrite":0.00045,"total":0.012}},
                "stopReason": if i % 10 == 1 { "toolUse" } else { "stop" },"timestamp":ts,
                "responseId":format!("msg_{i:016x}")})
        };
        let line = json!({"type":"message","id":id,"parentId":parent,
            "timestamp":"2026-01-01T00:00:00.000Z","message":message});
        writeln!(out, "{line}").unwrap();
        parent = json!(id);
    }
    out.flush().unwrap();
}

fn measure(path: &Path, iterations: usize) -> (Duration, usize) {
    let mut times = Vec::with_capacity(iterations);
    let mut messages = 0;
    for _ in 0..iterations {
        let start = Instant::now();
        let store = SessionStore::open(path).unwrap();
        let opened = start.elapsed();
        let context = store.build_context();
        times.push(start.elapsed());
        if std::env::var_os("TAU_BENCH_SPLIT").is_some() {
            println!(
                "open {:.2} ms, context {:.2} ms",
                opened.as_secs_f64() * 1e3,
                (start.elapsed() - opened).as_secs_f64() * 1e3
            );
        }
        messages = context.messages.len();
        drop(store);
    }
    times.sort();
    (times[times.len() / 2], messages)
}

/// `open_deferred` up to its answer (file read, header, the branch's messages cut out of the
/// text), without waiting for the typed parse.
fn measure_deferred(path: &Path, iterations: usize) -> Duration {
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let opening = SessionStore::open_deferred(path).unwrap();
        assert!(opening.messages().is_some());
        times.push(start.elapsed());
        drop(opening.finish().unwrap());
    }
    times.sort();
    times[times.len() / 2]
}

/// The floor on this machine: reading the file and scanning its JSON without building
/// anything.
fn scan_floor(path: &Path, iterations: usize) -> Duration {
    use std::io::BufRead;
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let file = std::fs::File::open(path).unwrap();
        let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).unwrap() > 0 {
            let _: serde::de::IgnoredAny = serde_json::from_slice(&line).unwrap();
            line.clear();
        }
        times.push(start.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    for (entries, iterations) in [(5_000, 40), (100_000, 5)] {
        let path = dir.path().join(format!("s{entries}.jsonl"));
        write_session(&path, entries);
        let size = std::fs::metadata(&path).unwrap().len();
        if std::env::var_os("TAU_BENCH_DEFERRED_ONLY").is_some() {
            // For profiling the switch path alone: perf record cargo bench ...
            let deferred = measure_deferred(&path, iterations * 5);
            println!(
                "{entries:>7} entries: deferred open {:>8.2} ms",
                deferred.as_secs_f64() * 1e3
            );
            continue;
        }
        let (median, messages) = measure(&path, iterations);
        let floor = scan_floor(&path, iterations);
        let deferred = measure_deferred(&path, iterations);
        println!(
            "{entries:>7} entries, {:>6.1} MB: open + build_context median {:>8.2} ms over {iterations} runs ({messages} messages); read + JSON scan floor {:>8.2} ms; deferred open {:>8.2} ms",
            size as f64 / 1e6,
            median.as_secs_f64() * 1e3,
            floor.as_secs_f64() * 1e3,
            deferred.as_secs_f64() * 1e3
        );
    }
}
