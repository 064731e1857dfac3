//! `thumbnailer`: shrinks a large RGB image to a thumbnail, modelling SeBS's 210.thumbnailer
//! (PIL's `Image.thumbnail`: fit inside a bounding box, keep the aspect ratio, never enlarge).
//! SeBS decodes a stored photo; here the image is drawn procedurally instead (gradients, a
//! texture, noise), which like decoding touches every source pixel once.
//!
//! The resize is an area-averaging (box) filter with fractional pixel coverage, done as two
//! separable passes: every source pixel contributes, so the thumbnail does not alias, and the work
//! grows with the source's area.
//!
//! Request: `seed=42 size=2900` (source width; the height is ¾ of it) and optionally `box=200`
//! (the thumbnail's bounding width; its height is ¾ of it). Answer: `source=WxH thumbnail=WxH
//! mean=R,G,B checksum=…`.

use suite_input::{Params, Rng};

const DEFAULT_WIDTH: u64 = 2900;
/// 8000 × 6000 × 3 bytes is 144 MB, over the default memory limit; this stays well below it.
const MAX_WIDTH: u64 = 5000;
const DEFAULT_BOX: u64 = 200;

/// An 8-bit RGB image, row after row.
struct Image {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

fn thumbnailer(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let width = params.u64_in("size", DEFAULT_WIDTH, 4, MAX_WIDTH) as usize;
    let bounding = params.u64_in("box", DEFAULT_BOX, 4, MAX_WIDTH) as usize;
    let source = draw(width, width * 3 / 4, &mut Rng::new(params.seed()));
    let (tw, th) = fit(source.width, source.height, bounding, bounding * 3 / 4);
    let thumbnail = resize(&source, tw, th);
    let mut sums = [0u64; 3];
    for pixel in thumbnail.pixels.chunks_exact(3) {
        for (sum, &c) in sums.iter_mut().zip(pixel) {
            *sum += u64::from(c);
        }
    }
    let count = (tw * th) as u64;
    let checksum = thumbnail
        .pixels
        .iter()
        .enumerate()
        .fold(0u64, |acc, (i, &c)| {
            acc.wrapping_add((i as u64 + 1) * u64::from(c))
        });
    format!(
        "seed={} source={}x{} thumbnail={tw}x{th} mean={},{},{} checksum={checksum}\n",
        params.seed(),
        source.width,
        source.height,
        sums[0] / count,
        sums[1] / count,
        sums[2] / count,
    )
    .into_bytes()
}

/// A photo-like test card: a colour gradient, a diagonal texture and a disc, plus sensor-like
/// noise, so that the thumbnail's pixels all differ and depend on the seed.
fn draw(width: usize, height: usize, rng: &mut Rng) -> Image {
    let mut pixels = Vec::with_capacity(width * height * 3);
    let (cx, cy) = (width as i64 / 2, height as i64 / 2);
    let radius2 = (height as i64 / 3).pow(2);
    for y in 0..height {
        for x in 0..width {
            let noise = rng.next_u64();
            let inside = (x as i64 - cx).pow(2) + (y as i64 - cy).pow(2) < radius2;
            let r = (x * 255 / width) as i32;
            let g = (y * 255 / height) as i32;
            let b = if inside {
                230
            } else {
                ((x + y) % 64 * 4) as i32
            };
            // Three independent noise values of ±16 from one draw.
            let jitter = |shift: u32| ((noise >> shift) & 31) as i32 - 16;
            pixels.extend([
                (r + jitter(0)).clamp(0, 255) as u8,
                (g + jitter(8)).clamp(0, 255) as u8,
                (b + jitter(16)).clamp(0, 255) as u8,
            ]);
        }
    }
    Image {
        width,
        height,
        pixels,
    }
}

/// The largest size with `width:height`'s aspect ratio inside `max_w × max_h`, never larger than
/// the original, and at least one pixel each way.
fn fit(width: usize, height: usize, max_w: usize, max_h: usize) -> (usize, usize) {
    if width <= max_w && height <= max_h {
        return (width, height);
    }
    let scale = (max_w as f64 / width as f64).min(max_h as f64 / height as f64);
    let w = ((width as f64 * scale).round() as usize).clamp(1, max_w);
    let h = ((height as f64 * scale).round() as usize).clamp(1, max_h);
    (w, h)
}

/// For each output index, the first source index it covers and the weight of each source index
/// from there on (the fraction of the output pixel it covers), for shrinking `from` to `to`.
fn box_weights(from: usize, to: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = from as f64 / to as f64;
    (0..to)
        .map(|i| {
            let (start, end) = (i as f64 * scale, (i + 1) as f64 * scale);
            let first = start.floor() as usize;
            let last = (end.ceil() as usize).min(from);
            let weights = (first..last)
                .map(|s| {
                    let covered = (end.min(s as f64 + 1.0) - start.max(s as f64)).max(0.0);
                    (covered / scale) as f32
                })
                .collect();
            (first, weights)
        })
        .collect()
}

/// Area-averaging resize: rows first (every source pixel), then columns (on the narrow result).
fn resize(source: &Image, width: usize, height: usize) -> Image {
    let columns = box_weights(source.width, width);
    let mut narrow = vec![0f32; source.height * width * 3];
    for (row, out) in source
        .pixels
        .chunks_exact(source.width * 3)
        .zip(narrow.chunks_exact_mut(width * 3))
    {
        for ((first, weights), pixel) in columns.iter().zip(out.chunks_exact_mut(3)) {
            let mut acc = [0f32; 3];
            for (k, &w) in weights.iter().enumerate() {
                let s = (first + k) * 3;
                for c in 0..3 {
                    acc[c] += w * f32::from(row[s + c]);
                }
            }
            pixel.copy_from_slice(&acc);
        }
    }
    let rows = box_weights(source.height, height);
    let mut pixels = vec![0u8; width * height * 3];
    for ((first, weights), out) in rows.iter().zip(pixels.chunks_exact_mut(width * 3)) {
        for (x, value) in out.iter_mut().enumerate() {
            let acc: f32 = weights
                .iter()
                .enumerate()
                .map(|(k, &w)| w * narrow[(first + k) * width * 3 + x])
                .sum();
            *value = acc.round().clamp(0.0, 255.0) as u8;
        }
    }
    Image {
        width,
        height,
        pixels,
    }
}

mote_sdk::handler!(thumbnailer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_like_pil_thumbnail() {
        assert_eq!(fit(2400, 1800, 200, 150), (200, 150));
        assert_eq!(fit(1000, 100, 200, 150), (200, 20));
        assert_eq!(fit(100, 75, 200, 150), (100, 75));
    }

    #[test]
    fn box_filter_averages_and_keeps_flat_areas_flat() {
        let flat = Image {
            width: 7,
            height: 5,
            pixels: [10, 20, 30].repeat(35),
        };
        let small = resize(&flat, 3, 2);
        assert_eq!(small.pixels, [10, 20, 30].repeat(6));
        let stripes = Image {
            width: 4,
            height: 1,
            pixels: vec![0, 0, 0, 200, 200, 200, 0, 0, 0, 200, 200, 200],
        };
        assert_eq!(resize(&stripes, 2, 1).pixels, vec![100; 6]);
        for (_, weights) in box_weights(2400, 200) {
            assert!((weights.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn default_request_makes_a_200_by_150_thumbnail() {
        let out = String::from_utf8(thumbnailer(b"size=800")).unwrap();
        assert!(out.contains("source=800x600 thumbnail=200x150 "), "{out}");
    }
}
