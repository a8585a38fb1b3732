//! Reading files into memory that starts on a cache line. On this project's AMD EPYC machines
//! the kernel copies a file's pages into memory 16 bytes past a page boundary, which is where an
//! allocator puts a large block, four to five times slower than into memory on a cache line (10
//! MB in 7.2 ms against 1.6 ms, a C loop of `read` into either; issue 41): every large read goes
//! through [`BlockBuffer`] or [`read_to_end_aligned`].

use std::io::{self, Read};

/// The alignment of the block a read fills: the kernel copies a file's pages into memory that
/// starts on a cache line four to five times faster than into memory 16 bytes past one (measured
/// on this project's AMD EPYC machines: 10 MB in 1.6 ms against 7.2 ms), and an allocator's large
/// block starts 16 bytes past a page.
pub const ALIGN: usize = 64;

/// The buffer both passes read through: a block that starts on a cache line, with room before
/// it for the bytes of a character the previous block cut.
#[derive(Debug)]
pub struct BlockBuffer {
    pub(crate) bytes: Vec<u8>,
    /// Where the block starts in `bytes`.
    pub(crate) block_at: usize,
    pub(crate) block: usize,
}

impl BlockBuffer {
    /// A buffer whose block holds `block` bytes.
    pub fn new(block: usize) -> BlockBuffer {
        let bytes = vec![0; block + 2 * ALIGN];
        let lead = bytes[ALIGN..].as_ptr().align_offset(ALIGN).min(ALIGN - 1);
        BlockBuffer {
            bytes,
            block_at: ALIGN + lead,
            block,
        }
    }

    /// Writes to every page of the buffer, so that reads into it fault none in. The first fault
    /// in memory never touched takes the process's memory-map lock, which a thread starting
    /// beside it holds while it maps its own memory: a reader faulting in its block waited for
    /// the other thread's start, about 0.5 ms at a time (issue 41).
    pub(crate) fn touch_pages(&mut self) {
        const PAGE_BYTES: usize = 4096;
        for byte in self.bytes.iter_mut().step_by(PAGE_BYTES) {
            *byte = std::hint::black_box(0);
        }
    }

    /// The block, to read into.
    pub fn block(&mut self) -> &mut [u8] {
        &mut self.bytes[self.block_at..self.block_at + self.block]
    }
}

/// [`Read::read_to_end`] into `bytes`, whose spare capacity should hold the rest: a first read of
/// a few bytes ends where the rest land on a cache line. The bytes read.
pub fn read_to_end_aligned<R: Read>(reader: &mut R, bytes: &mut Vec<u8>) -> io::Result<usize> {
    let spare = bytes.spare_capacity_mut();
    let lead = spare.as_ptr().align_offset(ALIGN);
    let mut read = 0;
    if lead < spare.len() {
        read += reader.by_ref().take(lead as u64).read_to_end(bytes)?;
    }
    Ok(read + reader.read_to_end(bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_starts_on_a_cache_line_and_reads_are_whole() {
        let mut buffer = BlockBuffer::new(1000);
        assert_eq!(buffer.block().len(), 1000);
        assert_eq!(buffer.block().as_ptr().align_offset(ALIGN), 0);
        let text: Vec<u8> = (0..10_000u32).map(|n| (n % 251) as u8).collect();
        let mut bytes = Vec::with_capacity(text.len());
        assert_eq!(
            read_to_end_aligned(&mut text.as_slice(), &mut bytes).unwrap(),
            text.len()
        );
        assert_eq!(bytes, text);
        let mut bytes = b"kept".to_vec();
        bytes.reserve(text.len());
        read_to_end_aligned(&mut text.as_slice(), &mut bytes).unwrap();
        assert_eq!(&bytes[..4], b"kept");
        assert_eq!(&bytes[4..], text);
    }
}
