//! Wire <-> domain conversion for what pool entries send beside text:
//! synthetic images and clips travel as their size and seed, files once
//! per plan (`Pool.files`), referred to by index from each entry.

use std::collections::HashMap;
use std::sync::Arc;

use cicada_plan::pool::{Audio, Image, Media, MediaFile};

use crate::v1;

/// The pool's files as they are added, each once (by allocation: entries
/// that send the same file share one `Arc`).
#[derive(Default)]
pub(super) struct Files {
    index: HashMap<*const MediaFile, u32>,
    pub files: Vec<v1::MediaFile>,
}

impl Files {
    fn add(&mut self, f: &Arc<MediaFile>) -> u32 {
        let next = self.files.len() as u32;
        *self.index.entry(Arc::as_ptr(f)).or_insert_with(|| {
            self.files.push(v1::MediaFile {
                mime: f.mime.clone(),
                name: f.name.clone(),
                bytes: f.bytes.to_vec().into(),
            });
            next
        })
    }

    /// An entry's images and audio for the wire.
    pub fn media(&mut self, m: &Media) -> (Vec<v1::Image>, Option<v1::Audio>) {
        use v1::audio::Kind as A;
        use v1::image::Kind as I;
        let images = m
            .images
            .iter()
            .map(|i| v1::Image {
                kind: Some(match i {
                    Image::Synthetic {
                        width,
                        height,
                        seed,
                    } => I::Synthetic(v1::SyntheticImage {
                        width: *width,
                        height: *height,
                        seed: *seed,
                    }),
                    Image::File(f) => I::File(self.add(f)),
                }),
            })
            .collect();
        let audio = m.audio.as_ref().map(|a| v1::Audio {
            kind: Some(match a {
                Audio::Synthetic {
                    duration_ms,
                    sample_rate,
                    seed,
                } => A::Synthetic(v1::SyntheticAudio {
                    duration_ms: *duration_ms,
                    sample_rate: *sample_rate,
                    seed: *seed,
                }),
                Audio::File(f) => A::File(self.add(f)),
            }),
        });
        (images, audio)
    }
}

/// The pool's files, shared by the entries that send them.
pub(super) fn files_from(files: Vec<v1::MediaFile>) -> Vec<Arc<MediaFile>> {
    files
        .into_iter()
        .map(|f| {
            Arc::new(MediaFile {
                mime: f.mime,
                name: f.name,
                bytes: Arc::from(&f.bytes[..]),
            })
        })
        .collect()
}

fn file(files: &[Arc<MediaFile>], i: u32) -> Result<Arc<MediaFile>, String> {
    files
        .get(i as usize)
        .cloned()
        .ok_or_else(|| format!("an entry sends file {i} of {} in the pool", files.len()))
}

/// An entry's media from the wire, or what is wrong with them.
pub(super) fn media_from(
    images: Vec<v1::Image>,
    audio: Option<v1::Audio>,
    files: &[Arc<MediaFile>],
) -> Result<Media, String> {
    use v1::audio::Kind as A;
    use v1::image::Kind as I;
    let images = images
        .into_iter()
        .map(|i| match i.kind {
            Some(I::Synthetic(s)) => Ok(Image::Synthetic {
                width: s.width,
                height: s.height,
                seed: s.seed,
            }),
            Some(I::File(n)) => file(files, n).map(Image::File),
            None => Err("an image of no kind".to_string()),
        })
        .collect::<Result<_, _>>()?;
    let audio = match audio.map(|a| a.kind) {
        None => None,
        Some(Some(A::Synthetic(s))) => Some(Audio::Synthetic {
            duration_ms: s.duration_ms,
            sample_rate: s.sample_rate,
            seed: s.seed,
        }),
        Some(Some(A::File(n))) => Some(Audio::File(file(files, n)?)),
        Some(None) => return Err("an audio clip of no kind".into()),
    };
    Ok(Media { images, audio })
}
