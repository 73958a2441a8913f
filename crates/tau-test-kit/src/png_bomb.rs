//! PNGs of all-black 1-bit grayscale pixels, written by hand so that a huge one costs nothing
//! to make: the image data is one literal zero and then runs of 258 zeros, 13 bits each, in a
//! fixed-Huffman deflate block. Tests of image limits use them as decompression bombs.

pub fn png(width: u32, height: u32, idat: &[u8]) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // Bit depth 1, grayscale, deflate, adaptive filtering, no interlace.
    ihdr.extend_from_slice(&[1, 0, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A zlib stream of the image's raw rows: all zeros, filter bytes included.
pub fn zero_idat(width: u32, height: u32) -> Vec<u8> {
    let row = 1 + u64::from(width).div_ceil(8);
    let total = row * u64::from(height);
    let mut bits = Bits::default();
    bits.push(1, 1); // the final block
    bits.push(1, 2); // fixed Huffman codes
    bits.code(0x30, 8); // literal 0
    let runs = (total - 1) / 258;
    for _ in 0..runs {
        bits.code(0xC5, 8); // length 258
        bits.code(0, 5); // distance 1
    }
    for _ in 0..(total - 1) % 258 {
        bits.code(0x30, 8);
    }
    bits.code(0, 7); // end of block
    let mut out = vec![0x78, 0x01];
    out.extend(bits.bytes);
    if bits.used > 0 {
        out.push(bits.current);
    }
    // Adler-32 of zeros: the low sum stays 1, the high one grows by 1 a byte.
    let high = u32::try_from(total % 65_521).unwrap_or(0);
    out.extend_from_slice(&((high << 16) | 1).to_be_bytes());
    out
}

#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    current: u8,
    used: u8,
}

impl Bits {
    /// `count` bits of `value`, lowest first (header fields).
    fn push(&mut self, value: u32, count: u8) {
        for i in 0..count {
            self.bit((value >> i) & 1);
        }
    }
    /// A Huffman code, highest bit first.
    fn code(&mut self, value: u32, count: u8) {
        for i in (0..count).rev() {
            self.bit((value >> i) & 1);
        }
    }
    fn bit(&mut self, bit: u32) {
        if bit == 1 {
            self.current |= 1 << self.used;
        }
        self.used += 1;
        if self.used == 8 {
            self.bytes.push(self.current);
            self.current = 0;
            self.used = 0;
        }
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(kind.iter().chain(data));
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32<'a>(bytes: impl Iterator<Item = &'a u8>) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
