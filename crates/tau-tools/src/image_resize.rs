//! Bringing an image the `read` tool returns within what providers accept inline
//! (tools-resources §1.1.1): at most 2000×2000 pixels and a base64 payload under 4.5 MB,
//! trying PNG first and then ever lower JPEG qualities, shrinking by 0.75 until it fits.
//!
//! A small file can hold a huge image (a 514 KB PNG of 11500×11500 pixels costs 0.9 GB to
//! decode and resize), so the size is read from the header first and an image above
//! [`MAX_PIXELS`] is not decoded; and images are decoded one at a time, so parallel reads
//! do not add up.

use std::io::Cursor;
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageReader, Limits};

/// The most pixels an image may have to be decoded: 50 megapixels holds an 8K screenshot
/// (7680×4320, 33 Mpx) with room to spare and a 50 MP phone photo (8160×6120), the largest
/// images anyone hands the model; the model sees at most 2000×2000 of it anyway. Decoding
/// and resizing the largest admitted image peaks around half a gigabyte.
pub(crate) const MAX_PIXELS: u64 = 50_000_000;

/// What a decoder may allocate: 50 Mpx at 16-bit RGBA (8 bytes a pixel) is 400 MB; this
/// bounds a decoder whose memory does not follow from the header's dimensions.
const MAX_DECODER_ALLOC: u64 = 512 * 1024 * 1024;

/// Held while an image is decoded, resized and encoded: parallel tool calls take turns, so
/// the peak is one image's, not the sum of all of them.
static DECODING: Mutex<()> = Mutex::new(());

/// The limits of one resize.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResizeLimits {
    pub max_width: u32,
    pub max_height: u32,
    /// Measured on the base64 text, as providers measure the payload.
    pub max_base64_bytes: usize,
    /// The first JPEG quality tried.
    pub jpeg_quality: u8,
}

impl Default for ResizeLimits {
    fn default() -> Self {
        Self {
            max_width: 2000,
            max_height: 2000,
            max_base64_bytes: 4_718_592,
            jpeg_quality: 80,
        }
    }
}

/// An image ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResizedImage {
    /// Base64 of the encoded image.
    pub data: String,
    pub mime_type: String,
    pub original_width: u32,
    pub original_height: u32,
    pub width: u32,
    pub height: u32,
    pub was_resized: bool,
}

/// The base64 length of `n` bytes (standard alphabet, padded).
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Why an image is left out of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Omitted {
    /// It cannot be decoded, or not brought under the size limit even at 1×1.
    CannotResize,
    /// It has more than [`MAX_PIXELS`]; it was not decoded.
    TooManyPixels { width: u32, height: u32 },
}

impl Omitted {
    /// The bracketed note that stands in for the image.
    pub(crate) fn note(self) -> String {
        match self {
            Self::CannotResize => {
                "[Image omitted: could not be resized below the inline image size limit.]"
                    .to_string()
            }
            Self::TooManyPixels { width, height } => format!(
                "[Image omitted: {width}x{height} pixels is more than the {} megapixels an image may have to be decoded.]",
                MAX_PIXELS / 1_000_000
            ),
        }
    }
}

/// Fits `bytes` (an image of type `mime_type`) into `limits`; when it cannot, why, and the
/// caller omits it. CPU-bound and, for large images, memory-bound: run it off the async
/// runtime; calls take turns.
pub(crate) fn resize_image(
    bytes: &[u8],
    mime_type: &str,
    limits: ResizeLimits,
) -> Result<ResizedImage, Omitted> {
    let decoder = open_within_limits(bytes)?;
    let _turn = DECODING.lock().unwrap_or_else(PoisonError::into_inner);
    let image = decode_oriented(decoder).ok_or(Omitted::CannotResize)?;
    let (original_width, original_height) = (image.width(), image.height());
    if original_width <= limits.max_width
        && original_height <= limits.max_height
        && base64_len(bytes.len()) < limits.max_base64_bytes
    {
        return Ok(ResizedImage {
            data: STANDARD.encode(bytes),
            mime_type: mime_type.to_string(),
            original_width,
            original_height,
            width: original_width,
            height: original_height,
            was_resized: false,
        });
    }

    let (mut width, mut height) = (original_width, original_height);
    if width > limits.max_width {
        height = js_round(f64::from(height) * f64::from(limits.max_width) / f64::from(width));
        width = limits.max_width;
    }
    if height > limits.max_height {
        width = js_round(f64::from(width) * f64::from(limits.max_height) / f64::from(height));
        height = limits.max_height;
    }
    let (width, height) = (width.max(1), height.max(1));

    let mut qualities: Vec<u8> = Vec::with_capacity(5);
    for q in [limits.jpeg_quality, 85, 70, 55, 40] {
        if !qualities.contains(&q) {
            qualities.push(q);
        }
    }

    let (mut w, mut h) = (width, height);
    loop {
        let resized = image.resize_exact(w, h, FilterType::Lanczos3);
        if let Some((data, mime)) = first_fitting_encoding(&resized, &qualities, limits) {
            return Ok(ResizedImage {
                data,
                mime_type: mime.to_string(),
                original_width,
                original_height,
                width: w,
                height: h,
                was_resized: true,
            });
        }
        if w == 1 && h == 1 {
            return Err(Omitted::CannotResize);
        }
        let next_w = if w == 1 { 1 } else { scale_down(w) };
        let next_h = if h == 1 { 1 } else { scale_down(h) };
        if (next_w, next_h) == (w, h) {
            return Err(Omitted::CannotResize);
        }
        (w, h) = (next_w, next_h);
    }
}

/// `[Image: original …]`, present only when the image was resized, so the model can map
/// coordinates it reads off the smaller image back to the original.
pub(crate) fn dimension_note(image: &ResizedImage) -> Option<String> {
    if !image.was_resized {
        return None;
    }
    let scale = f64::from(image.original_width) / f64::from(image.width);
    Some(format!(
        "[Image: original {}x{}, displayed at {}x{}. Multiply coordinates by {} to map to original image.]",
        image.original_width,
        image.original_height,
        image.width,
        image.height,
        to_fixed_2(scale)
    ))
}

/// A decoder that has read the image's header, for an image within [`MAX_PIXELS`].
fn open_within_limits(bytes: &[u8]) -> Result<impl ImageDecoder + '_, Omitted> {
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|_| Omitted::CannotResize)?;
    // No width or height limit here: the pixel count below is checked with the dimensions in
    // hand, so the note can name them.
    let mut decoder_limits = Limits::default();
    decoder_limits.max_alloc = Some(MAX_DECODER_ALLOC);
    reader.limits(decoder_limits);
    let decoder = reader.into_decoder().map_err(|_| Omitted::CannotResize)?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(Omitted::TooManyPixels { width, height });
    }
    Ok(decoder)
}

/// Decodes the image with its EXIF orientation applied, as a viewer would show it.
fn decode_oriented(mut decoder: impl ImageDecoder) -> Option<DynamicImage> {
    let orientation = decoder.orientation().ok();
    let mut image = DynamicImage::from_decoder(decoder).ok()?;
    if let Some(orientation) = orientation {
        image.apply_orientation(orientation);
    }
    // 16-bit and float images would encode to needlessly large PNGs; pi's encoder works in
    // 8-bit RGBA too.
    let image = match image {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_) => image,
        other if other.color().has_alpha() => DynamicImage::ImageRgba8(other.to_rgba8()),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    };
    Some(image)
}

/// PNG first, then JPEG at each quality: the first whose base64 fits wins.
fn first_fitting_encoding(
    image: &DynamicImage,
    qualities: &[u8],
    limits: ResizeLimits,
) -> Option<(String, &'static str)> {
    let mut png = Vec::new();
    if image
        .write_with_encoder(image::codecs::png::PngEncoder::new(&mut png))
        .is_ok()
        && base64_len(png.len()) < limits.max_base64_bytes
    {
        return Some((STANDARD.encode(&png), "image/png"));
    }
    // JPEG has no alpha channel.
    let rgb = match image {
        DynamicImage::ImageLuma8(_) | DynamicImage::ImageRgb8(_) => image.clone(),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    };
    for &quality in qualities {
        let mut jpeg = Vec::new();
        let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, quality);
        if rgb.write_with_encoder(encoder).is_ok()
            && base64_len(jpeg.len()) < limits.max_base64_bytes
        {
            return Some((STANDARD.encode(&jpeg), "image/jpeg"));
        }
    }
    None
}

/// `Math.max(1, Math.floor(n * 0.75))`.
fn scale_down(n: u32) -> u32 {
    // n * 3 / 4 in integers equals floor(n * 0.75) exactly, without float rounding.
    let scaled = u64::from(n) * 3 / 4;
    u32::try_from(scaled).unwrap_or(u32::MAX).max(1)
}

/// JavaScript's `Math.round` for non-negative values: halves round up.
fn js_round(x: f64) -> u32 {
    let rounded = (x + 0.5).floor();
    if rounded <= 0.0 {
        0
    } else if rounded >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        // In range and integral, checked above.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let r = rounded as u32;
        r
    }
}

/// JavaScript's `x.toFixed(2)` for non-negative `x`. Rust rounds exact ties to even
/// (`1.125` → `1.12`) where JavaScript rounds them up (`1.13`); a tie at two decimals is
/// exactly a value whose eighths are odd, which happens for ordinary ratios like 2250/2000.
pub(crate) fn to_fixed_2(x: f64) -> String {
    let eighths = x * 8.0;
    if x.is_finite() && x >= 0.0 && eighths.fract() == 0.0 && eighths % 2.0 == 1.0 && x < 1e15 {
        let hundredths = (x * 100.0).ceil();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = hundredths as u64;
        return format!("{}.{:02}", n / 100, n % 100);
    }
    format!("{x:.2}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
    use tau_test_kit::png_bomb;

    fn png_bytes(image: &DynamicImage) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        image
            .write_to(&mut out, ImageFormat::Png)
            .expect("encode png");
        out.into_inner()
    }

    /// Pixels that compress badly, so size limits bite.
    fn noisy(width: u32, height: u32) -> DynamicImage {
        let mut state: u32 = 0x1234_5678;
        DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |_, _| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let [a, b, c, _] = state.to_le_bytes();
            Rgb([a, b, c])
        }))
    }

    #[test]
    fn small_images_pass_through_unchanged() {
        let image = DynamicImage::ImageRgba8(RgbaImage::from_pixel(10, 20, Rgba([1, 2, 3, 4])));
        let bytes = png_bytes(&image);
        let out = resize_image(&bytes, "image/png", ResizeLimits::default()).expect("fits");
        assert!(!out.was_resized);
        assert_eq!(out.data, STANDARD.encode(&bytes));
        assert_eq!((out.width, out.height), (10, 20));
        assert_eq!(dimension_note(&out), None);
    }

    #[test]
    fn wide_images_scale_to_the_width_limit() {
        let image = DynamicImage::ImageRgb8(RgbImage::from_pixel(3000, 100, Rgb([9, 9, 9])));
        let out = resize_image(&png_bytes(&image), "image/png", ResizeLimits::default())
            .expect("resizes");
        assert_eq!((out.width, out.height), (2000, 67));
        assert_eq!(out.mime_type, "image/png");
        assert_eq!(
            dimension_note(&out).as_deref(),
            Some(
                "[Image: original 3000x100, displayed at 2000x67. Multiply coordinates by 1.50 to map to original image.]"
            )
        );
    }

    #[test]
    fn tall_images_scale_to_the_height_limit() {
        let image = DynamicImage::ImageRgb8(RgbImage::from_pixel(50, 2500, Rgb([0, 0, 0])));
        let out = resize_image(&png_bytes(&image), "image/png", ResizeLimits::default())
            .expect("resizes");
        assert_eq!((out.width, out.height), (40, 2000));
    }

    #[test]
    fn falls_back_to_jpeg_then_smaller_sizes() {
        let image = noisy(200, 200);
        let bytes = png_bytes(&image);
        // Noise at 200×200 is ~120 KB as PNG; JPEG at quality 80 is well under 100 KB.
        let limits = ResizeLimits {
            max_base64_bytes: 100_000,
            ..ResizeLimits::default()
        };
        let out = resize_image(&bytes, "image/png", limits).expect("fits as jpeg");
        assert_eq!(out.mime_type, "image/jpeg");
        assert!(out.data.len() < 100_000);
        assert!(out.was_resized, "the byte limit alone forces a re-encode");

        let tiny = ResizeLimits {
            max_base64_bytes: 3_000,
            ..ResizeLimits::default()
        };
        let out = resize_image(&bytes, "image/png", tiny).expect("fits when smaller");
        assert!(
            out.width < 200 && out.height < 200,
            "{}x{}",
            out.width,
            out.height
        );
        assert_eq!(out.width, out.height);
        assert!(out.data.len() < 3_000);
    }

    #[test]
    fn impossible_limits_and_garbage_are_omitted() {
        let bytes = png_bytes(&noisy(8, 8));
        let limits = ResizeLimits {
            max_base64_bytes: 10,
            ..ResizeLimits::default()
        };
        assert_eq!(
            resize_image(&bytes, "image/png", limits),
            Err(Omitted::CannotResize)
        );
        assert_eq!(
            resize_image(
                b"\x89PNG\r\n\x1a\nnot really",
                "image/png",
                ResizeLimits::default()
            ),
            Err(Omitted::CannotResize)
        );
    }

    #[test]
    fn the_bomb_generator_makes_a_valid_png() {
        let bytes = png_bomb::png(70, 30, &png_bomb::zero_idat(70, 30));
        let out = resize_image(&bytes, "image/png", ResizeLimits::default()).expect("decodes");
        assert_eq!((out.original_width, out.original_height), (70, 30));
        let decoded = image::load_from_memory(&bytes).expect("decodes");
        assert!(decoded.to_luma8().pixels().all(|p| p.0 == [0]));
    }

    #[test]
    fn an_image_over_the_pixel_cap_is_not_decoded() {
        // 132 megapixels in about 100 KB: decoding it would take well over a gigabyte.
        let bytes = png_bomb::png(11_500, 11_500, &png_bomb::zero_idat(11_500, 11_500));
        assert!(bytes.len() < 150_000, "{}", bytes.len());
        let out = resize_image(&bytes, "image/png", ResizeLimits::default());
        assert_eq!(
            out,
            Err(Omitted::TooManyPixels {
                width: 11_500,
                height: 11_500
            })
        );
        assert_eq!(
            out.err().map(Omitted::note).as_deref(),
            Some(
                "[Image omitted: 11500x11500 pixels is more than the 50 megapixels an image may have to be decoded.]"
            )
        );
        // The count is taken in 64 bits: 65536² is 0 in 32-bit arithmetic. Only the header
        // is read, so the image data may be missing.
        let header_only = png_bomb::png(65_536, 65_536, &[]);
        assert_eq!(
            resize_image(&header_only, "image/png", ResizeLimits::default()),
            Err(Omitted::TooManyPixels {
                width: 65_536,
                height: 65_536
            })
        );
        // One pixel over, in a single row.
        let row = png_bomb::png(50_000_001, 1, &[]);
        assert!(matches!(
            resize_image(&row, "image/png", ResizeLimits::default()),
            Err(Omitted::TooManyPixels { .. })
        ));
    }

    #[test]
    fn decoding_takes_turns() {
        let bytes = png_bytes(&DynamicImage::ImageRgb8(RgbImage::from_pixel(
            4,
            4,
            Rgb([1, 2, 3]),
        )));
        let held = DECODING.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = std::thread::spawn(move || {
            resize_image(&bytes, "image/png", ResizeLimits::default()).is_ok()
        });
        // While another decode holds the turn, this one cannot finish, however long it is
        // given; a decode that did not wait would be done in microseconds.
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!waiting.is_finished());
        drop(held);
        assert!(waiting.join().unwrap_or(false));
    }

    #[test]
    fn javascript_rounding() {
        assert_eq!(to_fixed_2(1.5), "1.50");
        assert_eq!(to_fixed_2(1.125), "1.13");
        assert_eq!(to_fixed_2(1.375), "1.38");
        assert_eq!(to_fixed_2(2.0 / 3.0), "0.67");
        assert_eq!(to_fixed_2(3000.0 / 2000.0), "1.50");
        assert_eq!(js_round(66.666), 67);
        assert_eq!(js_round(2.5), 3);
        assert_eq!(scale_down(2000), 1500);
        assert_eq!(scale_down(1), 1);
        assert_eq!(scale_down(3), 2);
    }
}
