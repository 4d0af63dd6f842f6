//! Link flags for the `agentry` binary.
//!
//! On Linux with glibc the binary is linked with packed relative relocations (`DT_RELR`): a
//! position-independent Rust binary of this size carries hundreds of thousands of relative
//! relocations (every vtable and static string pointer), 24 bytes each in `.rela.dyn`, which
//! DT_RELR stores as bitmaps. The binary stays position-independent (ASLR unchanged). It needs
//! glibc 2.36 or later to run, so the flag is only given when the C library the binary links
//! against supports it (it defines the `GLIBC_ABI_DT_RELR` version); the linker must be GNU ld
//! 2.38+ or lld. `AGENTRY_NO_RELR=1` leaves it out.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=AGENTRY_NO_RELR");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || env != "gnu" || std::env::var_os("AGENTRY_NO_RELR").is_some() {
        return;
    }
    // The libc.so.6 the linker will find, as the C compiler that drives the link sees it.
    let libc = Command::new("cc")
        .arg("-print-file-name=libc.so.6")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let supported = libc
        .and_then(|p| std::fs::read(p).ok())
        .is_some_and(|b| b.windows(17).any(|w| w == b"GLIBC_ABI_DT_RELR"));
    if supported {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
