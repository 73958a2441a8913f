//! Link options for the `tau` binary that make start-up touch less memory (decision T89).
//!
//! - `startup-order.txt` (written by `scripts/startup-order.py`) names the functions a start-up
//!   runs up to answering `get_state`, by demangled names without hashes, and for a generic
//!   function's instances the size and hash of the one that ran (decision T130); the
//!   workspace's linker driver (`link/ordered-cc`, `link/order_symbols.py`) finds their
//!   symbols in the link and lld places them first in `.text`. The kernel maps file pages
//!   64 KiB around each fault, so the ~1.3 MB of code scattered over 24 MB of text kept ~6 MB
//!   resident, placed together ~1.3 MB. Names the binary no longer has are skipped.
//! - `-z pack-relative-relocs` stores the ~21,000 relative relocations as a bitmap (RELR)
//!   instead of a 500 KB table the loader reads at every start. The loader must understand it
//!   (glibc 2.36 and later), so it is used only when the glibc being linked against is that new.
//!
//! Both are lld options, so they are given only for the target whose default linker is lld.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link/startup-order.txt");
    println!("cargo:rerun-if-changed=link/order_symbols.py");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return;
    }
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    // Only an optimised build's layout matters, and the lookup of the names would slow every
    // debug link of the tests.
    if std::env::var("OPT_LEVEL").is_ok_and(|level| level != "0") {
        println!(
            "cargo:rustc-link-arg-bin=tau=-Wl,--symbol-ordering-file={dir}/link/startup-order.txt"
        );
        println!("cargo:rustc-link-arg-bin=tau=-Wl,--no-warn-symbol-ordering");
    }
    if glibc_has_relr() {
        println!("cargo:rustc-link-arg-bin=tau=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the build machine's glibc (the one linked against) is 2.36 or later.
fn glibc_has_relr() -> bool {
    let Ok(output) = Command::new("ldd").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(version) = text
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().last())
    else {
        return false;
    };
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    matches!((parts.next(), parts.next()), (Some(Some(major)), Some(Some(minor))) if (major, minor) >= (2, 36))
}
