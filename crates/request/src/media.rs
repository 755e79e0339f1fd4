//! What a request sends beside its text: images and audio, described rather
//! than held where they can be made again (a synthetic image is its size and
//! seed, generated where it is sent), and shared where they cannot (a file's
//! bytes are one allocation however many requests send them).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A file's bytes with their media type, shared by every request that sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaFile {
    /// MIME type, e.g. `image/png` or `audio/wav`.
    pub mime: String,
    /// The file's name as sent in a multipart part (no directories).
    pub name: String,
    /// The file as read.
    pub bytes: Arc<[u8]>,
}

/// One image of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Image {
    /// Random RGB pixels of this size, from this seed (vLLM's `random-mm`
    /// images), encoded where the request is built.
    Synthetic { width: u32, height: u32, seed: u64 },
    /// An image file, sent as it is.
    File(Arc<MediaFile>),
}

/// The audio of a request (a transcription's `file`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audio {
    /// A tone with seeded noise, 16-bit mono PCM WAV of this length, made
    /// where the request is built.
    Synthetic {
        duration_ms: u32,
        sample_rate: u32,
        seed: u64,
    },
    /// An audio file (WAV), sent as it is.
    File(Arc<MediaFile>),
}

/// Bytes of a synthetic WAV file's header.
pub const WAV_HEADER_BYTES: usize = 44;

impl Audio {
    /// Bytes of the file sent.
    pub fn bytes(&self) -> usize {
        match self {
            Audio::Synthetic {
                duration_ms,
                sample_rate,
                ..
            } => WAV_HEADER_BYTES + synthetic_samples(*duration_ms, *sample_rate) * 2,
            Audio::File(f) => f.bytes.len(),
        }
    }
}

/// Samples of a synthetic clip.
pub fn synthetic_samples(duration_ms: u32, sample_rate: u32) -> usize {
    (u64::from(duration_ms) * u64::from(sample_rate) / 1000) as usize
}

impl Image {
    /// Bytes of the image as encoded, at most (synthetic: uncompressed PNG of
    /// random pixels, which does not compress).
    pub fn approx_bytes(&self) -> usize {
        match self {
            Image::Synthetic { width, height, .. } => {
                let (w, h) = (*width as usize, *height as usize);
                // a filter byte per row, deflate's block headers, PNG's chunks
                h * (w * 3 + 1) + (h * (w * 3 + 1)).div_ceil(65_535) * 5 + 128
            }
            Image::File(f) => f.bytes.len(),
        }
    }
}

/// Everything a request sends beside its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// Images, in the order they go in the user message (after its text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// The audio, for transcription APIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Audio>,
}

impl Media {
    /// Nothing beside the text.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty() && self.audio.is_none()
    }

    /// Bytes the media add to a body, about (before any base64).
    pub fn approx_bytes(&self) -> usize {
        self.images.iter().map(Image::approx_bytes).sum::<usize>()
            + self.audio.as_ref().map_or(0, Audio::bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Media with nothing in it is left out of a serialized entry's fields.
    #[test]
    fn empty_media_is_empty_and_sizes_add_up() {
        assert!(Media::default().is_empty());
        let m = Media {
            images: vec![Image::Synthetic {
                width: 2,
                height: 2,
                seed: 1,
            }],
            audio: Some(Audio::Synthetic {
                duration_ms: 1000,
                sample_rate: 16_000,
                seed: 1,
            }),
        };
        assert!(!m.is_empty());
        assert_eq!(m.audio.as_ref().unwrap().bytes(), 44 + 32_000);
        assert!(m.approx_bytes() > 32_044);
        assert_eq!(
            serde_json::to_string(&Media::default()).unwrap(),
            "{}",
            "nothing is written for no media"
        );
    }
}
