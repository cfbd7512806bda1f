//! A growing column of plain values (the messages table's columns), in one
//! anonymous memory mapping that Python takes over without a copy.
//!
//! Why not a `Vec`: a million-packet capture's 48 columns are ~200 MB.  In a
//! `Vec` they were copied when it grew and once more into the bytes handed to
//! Python, each copy faulting in fresh pages (a fifth of the parse's time was
//! page faults; the hand-over another ~0.15 s).  A mapping grows by `mremap`
//! (the kernel moves its pages, nothing is copied) and is handed to Python as
//! it is ([`Col::take`]; python.rs wraps it in an object with the buffer
//! protocol that numpy reads in place).  Untouched capacity is not memory: a
//! page is resident once written.  (Advising the big mappings onto huge pages
//! was tried: a quarter fewer faults, no faster, 1M metadata packets; tried
//! again with the pages made ready ahead: the kernel's clearing of fresh huge
//! pages cost up to a second.)
//!
//! A column's values are staged (STAGE bytes, in cache) and written to its
//! mapping a block at a time, around the caches: written one by one, the 48
//! columns' stores waited for their cache lines to be read first.

use memmap2::MmapMut;
use std::marker::PhantomData;

/// A column's first mapping (bytes): small captures touch one page of it.
const FIRST_BYTES: usize = 64 << 10;
/// Bytes of a column's pages made ready at once past its first FIRST_BYTES:
/// a quarter of those written, within these bounds.
const AHEAD_MIN: usize = 64 << 10;
const AHEAD_MAX: usize = 1 << 20;

/// Bytes of a column's values staged before they are written to its mapping
/// (one aligned block at once).
const STAGE: usize = 256;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Stage([u8; STAGE]);

pub struct Col<T: bytemuck::Pod> {
    /// values pushed, not yet in the mapping
    stage: Stage,
    staged: usize,
    map: Option<MmapMut>,
    /// the mapping's start (dangling while there is none), cached: dozens of
    /// columns are pushed per message
    ptr: *mut T,
    len: usize,
    /// values that fit the pages made ready ahead (`push` checks only this)
    cap: usize,
    /// values that fit the mapping
    map_cap: usize,
    _t: PhantomData<T>,
}

// SAFETY: `ptr` points into `map`, owned by the column alone (no aliasing
// handle is kept): moving the column to another thread moves the mapping too.
unsafe impl<T: bytemuck::Pod + Send> Send for Col<T> {}

impl<T: bytemuck::Pod> Default for Col<T> {
    fn default() -> Self {
        Col {
            stage: Stage([0; STAGE]),
            staged: 0,
            map: None,
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
            cap: 0,
            map_cap: 0,
            _t: PhantomData,
        }
    }
}

impl<T: bytemuck::Pod> Col<T> {
    /// Values staged per block.
    const BLOCK: usize = STAGE / std::mem::size_of::<T>();

    /// Always inlined, the block's write out of line: dozens of columns are
    /// pushed per message, and a call per push (LLVM stopped inlining it once
    /// the reader grew) cost the parse of small frames 5%.  A value goes to
    /// the column's stage (in cache); a full stage is written to the mapping
    /// at once, with non-temporal stores where there are (x86-64): dozens of
    /// columns written value by value had their cache lines read before each
    /// was written (the stores stalled: a third of `Collector::message`).
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        let i = self.staged;
        // SAFETY: staged < BLOCK (a full stage is written out at once), and
        // the stage is aligned for any T
        unsafe { self.stage.0.as_mut_ptr().cast::<T>().add(i).write(v) };
        self.staged = i + 1;
        if i + 1 == Self::BLOCK {
            self.write_stage();
        }
    }

    /// The staged values appended to the mapping.
    #[inline(never)]
    fn write_stage(&mut self) {
        let n = self.staged;
        if n == 0 {
            return;
        }
        if self.len + n > self.cap {
            self.grow(self.len + n);
        }
        // SAFETY: len + n <= cap: the mapping holds them from ptr + len
        unsafe {
            let dst = self.ptr.add(self.len).cast::<u8>();
            let src = self.stage.0.as_ptr();
            // (a block after a partial one, see `settle`, is not aligned)
            if n != Self::BLOCK || !(dst as usize).is_multiple_of(16) || !stream_block(dst, src) {
                std::ptr::copy_nonoverlapping(src, dst, n * std::mem::size_of::<T>());
            }
        }
        self.len += n;
        self.staged = 0;
    }

    /// The staged values in the mapping, and the non-temporal stores done
    /// (visible to the thread the column goes to).
    fn settle(&mut self) {
        self.write_stage();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: sfence only orders stores
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }

    #[cold]
    #[inline(never)]
    /// Room for `need` values (need > cap).
    fn grow(&mut self, need: usize) {
        let size = std::mem::size_of::<T>().max(1);
        if need > self.map_cap {
            let mut bytes = (self.map_cap * size).max(FIRST_BYTES / 2) * 2;
            while bytes < need * size {
                bytes *= 2;
            }
            let map = match self.map.take() {
                None => MmapMut::map_anon(bytes),
                Some(old) => grown(old, self.len * size, bytes),
            }
            .unwrap_or_else(|e| panic!("cannot map {bytes} bytes for a column: {e}"));
            self.map = Some(map);
            self.map_cap = bytes / size;
        }
        let map = self.map.as_mut().expect("a mapping");
        self.ptr = map.as_mut_ptr().cast::<T>();
        let used = self.len * size;
        let end = if used < FIRST_BYTES {
            // a small column: its pages faulted in one by one as written
            FIRST_BYTES
        } else {
            // the next pages made ready in one call: a fault per 4 KiB page
            // written was a fifth of the parse of 1M metadata packets
            let ahead = (used / 4).clamp(AHEAD_MIN, AHEAD_MAX);
            let end = (used + ahead).min(self.map_cap * size);
            populate(map, used, end);
            end
        };
        self.cap = (end.max(need * size) / size).min(self.map_cap);
    }

    pub fn len(&self) -> usize {
        self.len + self.staged
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values written (a view of the mapping).
    pub fn as_slice(&mut self) -> &[T] {
        self.settle();
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the first len values of the mapping were written by push
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The mapping and the number of its bytes written, the column left empty.
    pub fn take(&mut self) -> (Option<MmapMut>, usize) {
        self.settle();
        let bytes = self.len * std::mem::size_of::<T>();
        let map = std::mem::take(self).map;
        (map, bytes)
    }
}

/// One stage's bytes (STAGE, from an aligned stage) written at `dst` (at a
/// multiple of STAGE into a page-aligned mapping) around the caches: false
/// when there is no such store here (copy them).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_block(dst: *mut u8, src: *const u8) -> bool {
    use std::arch::x86_64::{__m128i, _mm_load_si128, _mm_stream_si128};
    let (d, s) = (dst.cast::<__m128i>(), src.cast::<__m128i>());
    for k in 0..STAGE / 16 {
        _mm_stream_si128(d.add(k), _mm_load_si128(s.add(k)));
    }
    true
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn stream_block(_dst: *mut u8, _src: *const u8) -> bool {
    false
}

/// Fault in the pages of `map` over bytes [from, to) (written soon) in one
/// call, if the kernel can (Linux 5.14); else they fault when written.
#[cfg(target_os = "linux")]
fn populate(map: &MmapMut, from: usize, to: usize) {
    let page = from & !4095;
    if to > page {
        let _ = map.advise_range(memmap2::Advice::PopulateWrite, page, to - page);
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_map: &MmapMut, _from: usize, _to: usize) {}

/// The mapping made `bytes` long, its first `used` bytes kept: moved by the
/// kernel on Linux (mremap), copied elsewhere.
#[cfg(target_os = "linux")]
fn grown(mut old: MmapMut, _used: usize, bytes: usize) -> std::io::Result<MmapMut> {
    // SAFETY: no reference into the mapping outlives this call (the column
    // keeps only its start, re-read after the move)
    unsafe { old.remap(bytes, memmap2::RemapOptions::new().may_move(true))? };
    Ok(old)
}

#[cfg(not(target_os = "linux"))]
fn grown(old: MmapMut, used: usize, bytes: usize) -> std::io::Result<MmapMut> {
    let mut new = MmapMut::map_anon(bytes)?;
    new[..used].copy_from_slice(&old[..used]);
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_growth_in_order() {
        let mut c: Col<i64> = Col::default();
        assert!(c.is_empty() && c.as_slice().is_empty());
        let n = 3 * FIRST_BYTES + 5; // several remaps past the first mapping
        for i in 0..n as i64 {
            c.push(i * 7 - 3);
        }
        assert_eq!(c.len(), n);
        assert!(c
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i as i64 * 7 - 3));
        let (map, bytes) = c.take();
        assert_eq!(bytes, n * 8);
        let map = map.expect("a mapping");
        assert!(map.len() >= bytes);
        let back: &[i64] = bytemuck::cast_slice(&map[..bytes]);
        assert_eq!(back[n - 1], (n as i64 - 1) * 7 - 3);
        assert!(c.is_empty() && c.take().0.is_none());
    }

    #[test]
    fn values_pushed_after_a_look_stay_in_order() {
        // a look (as_slice) writes a partial stage: the blocks after it are
        // not aligned to the stage
        let mut c: Col<i32> = Col::default();
        let mut want = Vec::new();
        for round in 0..5i32 {
            for i in 0..(round * 97 + 3) {
                c.push(round * 100_000 + i);
                want.push(round * 100_000 + i);
            }
            assert_eq!(c.len(), want.len());
            assert_eq!(c.as_slice(), &want[..]);
        }
        for i in 0..(FIRST_BYTES as i32) {
            c.push(-i);
            want.push(-i);
        }
        assert_eq!(c.as_slice(), &want[..]);
    }

    #[test]
    fn byte_columns_grow_too() {
        let mut c: Col<u8> = Col::default();
        for i in 0..(FIRST_BYTES * 2 + 1) {
            c.push(i as u8);
        }
        assert_eq!(c.as_slice()[FIRST_BYTES * 2], (FIRST_BYTES * 2) as u8);
    }
}
