//! Images and audio as they go on the wire: synthetic ones made from their
//! size and seed (the same bytes on every worker), files as read, images as
//! `data:` URLs.

use std::collections::HashMap;

use base64::Engine;
use cicada_metrics::MediaSent;
use cicada_request::{Audio, Image, Media, WAV_HEADER_BYTES, synthetic_samples};

/// The image's media type and encoded bytes.
pub fn image_bytes(image: &Image) -> (&str, std::borrow::Cow<'_, [u8]>) {
    match image {
        Image::Synthetic {
            width,
            height,
            seed,
        } => ("image/png", synthetic_png(*width, *height, *seed).into()),
        Image::File(f) => (f.mime.as_str(), f.bytes.as_ref().into()),
    }
}

/// The image as a `data:` URL (what chat APIs take in an `image_url` part).
pub fn data_url(image: &Image) -> String {
    let (mime, bytes) = image_bytes(image);
    let engine = base64::engine::general_purpose::STANDARD;
    let mut url = String::with_capacity(bytes.len() * 4 / 3 + mime.len() + 16);
    url.push_str("data:");
    url.push_str(mime);
    url.push_str(";base64,");
    engine.encode_string(&bytes, &mut url);
    url
}

/// The audio's file name, media type and bytes.
pub fn audio_file(audio: &Audio) -> (&str, &str, std::borrow::Cow<'_, [u8]>) {
    match audio {
        Audio::Synthetic {
            duration_ms,
            sample_rate,
            seed,
        } => (
            "audio.wav",
            "audio/wav",
            synthetic_wav(*duration_ms, *sample_rate, *seed).into(),
        ),
        Audio::File(f) => (f.name.as_str(), f.mime.as_str(), f.bytes.as_ref().into()),
    }
}

/// What `media` sends, counted: images, their encoded bytes, the audio's
/// bytes. A synthetic image's size depends only on its width and height
/// (stored uncompressed), so each size is encoded once, in `sizes`.
pub fn sent(media: &Media, sizes: &mut HashMap<(u32, u32), u64>) -> MediaSent {
    let image_bytes = media
        .images
        .iter()
        .map(|i| match i {
            Image::Synthetic { width, height, .. } => *sizes
                .entry((*width, *height))
                .or_insert_with(|| synthetic_png(*width, *height, 0).len() as u64),
            Image::File(f) => f.bytes.len() as u64,
        })
        .sum();
    MediaSent {
        images: media.images.len() as u32,
        image_bytes,
        audio_bytes: media.audio.as_ref().map_or(0, |a| a.bytes() as u64),
        items: 0,
    }
}

/// SplitMix64: a fast seeded stream of pixels and noise, the same everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A PNG of `width` × `height` random RGB pixels from `seed` (vLLM's
/// `random-mm` draws i.i.d. pixels too: the worst case for compression, so
/// the image is stored uncompressed).
pub fn synthetic_png(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    let mut rng = SplitMix(seed);
    for chunk in pixels.chunks_mut(8) {
        let r = rng.next().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    let mut out = Vec::with_capacity(pixels.len() + pixels.len() / 100 + 256);
    let mut enc = png::Encoder::new(&mut out, width.max(1), height.max(1));
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::NoCompression);
    // writing into a Vec cannot fail, and the size matches the pixels (a
    // zero side is made 1 above and then has no pixels: write nothing)
    if width > 0
        && height > 0
        && let Ok(mut w) = enc.write_header()
    {
        let _ = w.write_image_data(&pixels);
        let _ = w.finish();
    }
    out
}

/// A 16-bit mono PCM WAV of `duration_ms`: a 440 Hz tone under seeded noise.
pub fn synthetic_wav(duration_ms: u32, sample_rate: u32, seed: u64) -> Vec<u8> {
    let samples = synthetic_samples(duration_ms, sample_rate);
    let data_len = (samples * 2) as u32;
    let mut out = Vec::with_capacity(WAV_HEADER_BYTES + samples * 2);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&(sample_rate * 2).to_le_bytes()); // byte rate
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    let mut rng = SplitMix(seed);
    let step = 2.0 * std::f64::consts::PI * 440.0 / f64::from(sample_rate.max(1));
    for i in 0..samples {
        let tone = (i as f64 * step).sin() * 8000.0;
        let noise = (rng.next() % 2001) as f64 - 1000.0;
        out.extend_from_slice(&((tone + noise) as i16).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic image decodes to its size, and its seed alone decides it.
    #[test]
    fn synthetic_images_decode_to_their_size_and_follow_the_seed() {
        let a = synthetic_png(33, 7, 5);
        let dec = png::Decoder::new(std::io::Cursor::new(&a));
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (33, 7));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(a, synthetic_png(33, 7, 5));
        assert_ne!(a, synthetic_png(33, 7, 6));
        let img = Image::Synthetic {
            width: 33,
            height: 7,
            seed: 5,
        };
        assert!(a.len() <= img.approx_bytes(), "{} > estimate", a.len());
        assert!(data_url(&img).starts_with("data:image/png;base64,iVBORw0KGgo"));
    }

    /// A synthetic clip is a WAV of its length, as the estimate says.
    #[test]
    fn synthetic_audio_is_a_wav_of_its_length() {
        let w = synthetic_wav(250, 16_000, 1);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(&w[8..16], b"WAVEfmt ");
        let audio = Audio::Synthetic {
            duration_ms: 250,
            sample_rate: 16_000,
            seed: 1,
        };
        assert_eq!(w.len(), audio.bytes());
        assert_eq!(w.len(), 44 + 4000 * 2);
        assert_ne!(w, synthetic_wav(250, 16_000, 2));
    }
}
