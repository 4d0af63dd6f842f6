//! The global allocator of `agentry serve` (feature `mimalloc`), for binaries that serve
//! agents: mimalloc, called the way the C library is fastest.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: agentry::alloc::MiMalloc = agentry::alloc::MiMalloc;
//! ```
//!
//! Why not the `mimalloc` crate's own `MiMalloc`: it passes every request to
//! `mi_malloc_aligned`, and mimalloc 3 (the crate's default) sends aligned requests whose
//! size is not a power of two through a slower, over-allocating path
//! (purpleprotocol/mimalloc_rust#170). Most Rust allocations ask for an alignment of 8 or
//! less (strings, vectors of bytes and words, boxed structs), which every mimalloc block
//! already has: its blocks are whole machine words, laid out from word-aligned pages. Those
//! go to plain `mi_malloc` (as Rust's own `System` allocator sends small alignments to
//! `malloc`); larger alignments keep the aligned entry points, since a plain block of, say,
//! 24 bytes is only word-aligned. Measured on the A2A echo server (`bench/instructions.sh`,
//! 2026-11-27): 3.4-4.2% fewer user-space instructions per request.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment of every block plain `mi_malloc` returns: a machine word (its blocks are
/// sized in words, from word-aligned pages).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator; see the [module docs](self).
#[derive(Debug, Clone, Copy, Default)]
pub struct MiMalloc;

/// Whether a block of `size` bytes from plain `mi_malloc` is aligned enough for `align`.
#[inline]
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every method forwards to mimalloc, which returns null on failure (as `GlobalAlloc`
// requires) and otherwise a block of at least the requested size, aligned as `plain` checks
// or by the aligned entry point; blocks are freed and reallocated by mimalloc, which finds
// their size and alignment itself, whichever entry point made them.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: any size is accepted; the alignment is a power of two (`Layout`'s rule).
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract), so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from mimalloc with `layout` (the caller's contract); the new
        // block is aligned for `layout.align()` at `new_size` as in `alloc`.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment from 1 to 4096 at sizes around it: the block is aligned, writable
    /// over its whole size, keeps its bytes through a growing and a shrinking realloc, and
    /// zeroed blocks are zero.
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        let a = MiMalloc;
        for shift in 0..=12 {
            let align = 1usize << shift;
            for size in [
                1, 3, 7, 8, 12, 15, 16, 17, 24, 31, 33, 48, 100, 4095, 4097, 70_000,
            ] {
                if size < align && size != 1 {
                    continue;
                }
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; each block is used within its size and freed
                // with the layout it was made with.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "align {align} size {size}");
                    for i in 0..size {
                        *p.add(i) = (i % 251) as u8;
                    }
                    let grown = a.realloc(p, layout, size * 3 + 5);
                    assert_eq!(
                        grown as usize % align,
                        0,
                        "realloc align {align} size {size}"
                    );
                    for i in 0..size {
                        assert_eq!(*grown.add(i), (i % 251) as u8);
                    }
                    let big = Layout::from_size_align(size * 3 + 5, align).unwrap();
                    let shrunk = a.realloc(grown, big, size.div_ceil(2));
                    assert_eq!(shrunk as usize % align, 0);
                    for i in 0..size.div_ceil(2) {
                        assert_eq!(*shrunk.add(i), (i % 251) as u8);
                    }
                    let small = Layout::from_size_align(size.div_ceil(2), align).unwrap();
                    a.dealloc(shrunk, small);

                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }

    /// The split point: word alignment or less, with a size at least as large, goes to
    /// plain `mi_malloc`; anything more aligned (16 included: a 24-byte block is only
    /// word-aligned) to the aligned entry points.
    #[test]
    fn only_requests_plain_malloc_aligns_take_the_plain_path() {
        assert!(plain(1, 1));
        assert!(plain(8, 8));
        assert!(plain(8, 24));
        assert!(!plain(8, 4));
        assert!(!plain(16, 24));
        assert!(!plain(4096, 4096));
    }
}
