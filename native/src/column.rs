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
//! was tried: a quarter fewer faults, no faster, 1M metadata packets.)

use memmap2::MmapMut;
use std::marker::PhantomData;

/// A column's first mapping (bytes): small captures touch one page of it.
const FIRST_BYTES: usize = 64 << 10;
/// Bytes of a column's pages made ready at once past its first FIRST_BYTES:
/// a quarter of those written, within these bounds.
const AHEAD_MIN: usize = 64 << 10;
const AHEAD_MAX: usize = 1 << 20;

pub struct Col<T: bytemuck::Pod> {
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
    /// Always inlined, the growth out of line: dozens of columns are pushed
    /// per message, and a call per push (LLVM stopped inlining it once the
    /// reader grew) cost the parse of small frames 5%.
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        if self.len == self.cap {
            self.grow();
        }
        // SAFETY: len < cap, and the mapping holds cap values of T from ptr
        // (page-aligned: aligned for any T)
        unsafe { self.ptr.add(self.len).write(v) };
        self.len += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let size = std::mem::size_of::<T>().max(1);
        if self.cap == self.map_cap {
            let bytes = (self.map_cap * size).max(FIRST_BYTES / 2) * 2;
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
        self.cap = (end / size).min(self.map_cap);
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values written (a view of the mapping).
    pub fn as_slice(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the first len values of the mapping were written by push
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The mapping and the number of its bytes written, the column left empty.
    pub fn take(&mut self) -> (Option<MmapMut>, usize) {
        let bytes = self.len * std::mem::size_of::<T>();
        let map = std::mem::take(self).map;
        (map, bytes)
    }
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
    fn byte_columns_grow_too() {
        let mut c: Col<u8> = Col::default();
        for i in 0..(FIRST_BYTES * 2 + 1) {
            c.push(i as u8);
        }
        assert_eq!(c.as_slice()[FIRST_BYTES * 2], (FIRST_BYTES * 2) as u8);
    }
}
