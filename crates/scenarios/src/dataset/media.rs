//! The workloads that send more than text: `random-mm` (vLLM's random
//! prompts with images attached) and `audio` (clips to transcribe).
//!
//! Synthetic images and clips are kept as their size and seed (workers make
//! the bytes where they send them); files are read once here and shared by
//! every entry that sends them, and travel once per plan.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    Audio, Build, DatasetError, DatasetReport, Image, MediaFile, PoolEntry, Prompt, random,
};
use crate::scenario::{AudioSpec, DatasetKind, ImageBucket, RandomMmSpec, RandomSpec};

/// RNG stream reserved for the images of `random-mm`.
const IMAGE_STREAM: u64 = 11;
/// RNG stream reserved for the clips of `audio`.
const AUDIO_STREAM: u64 = 12;

/// Most bytes of media files one pool reads (they travel in the plan).
pub const MEDIA_FILES_LIMIT_BYTES: u64 = 256 << 20;

/// The file extensions read as images, with their media types.
const IMAGE_TYPES: [(&str, &str); 5] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("webp", "image/webp"),
    ("gif", "image/gif"),
];

/// Why a `random-mm` dataset's item counts or image buckets cannot be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct MediaSpecError(pub String);

/// Inclusive bounds of the item count per request (vLLM's rule), or why none.
pub(crate) fn item_bounds(d: &RandomMmSpec) -> Result<(u32, u32), MediaSpecError> {
    let r = d.num_mm_items_range_ratio;
    if !(0.0..=1.0).contains(&r) {
        return Err(MediaSpecError(format!(
            "num_mm_items_range_ratio is {r}; it must be in [0, 1]"
        )));
    }
    let n = f64::from(d.base_items_per_request);
    let max = ((n * (1.0 + r)).ceil() as u32).min(d.limit_mm_per_prompt.image);
    let min = (n * (1.0 - r)).floor() as u32;
    if min > max {
        return Err(MediaSpecError(format!(
            "at least {min} images per request are asked, and limit_mm_per_prompt.image allows {max}"
        )));
    }
    Ok((min, max))
}

/// The image buckets to draw from, their weights summing to 1, or why none.
pub(crate) fn image_buckets(d: &RandomMmSpec) -> Result<Vec<(&ImageBucket, f64)>, MediaSpecError> {
    if let Some(b) = d.bucket_config.iter().find(|b| b.probability < 0.0) {
        return Err(MediaSpecError(format!(
            "bucket {}x{} has probability {}; probabilities must not be negative",
            b.height, b.width, b.probability
        )));
    }
    if let Some(b) = d
        .bucket_config
        .iter()
        .find(|b| b.frames != 1 && b.probability > 0.0)
    {
        return Err(MediaSpecError(format!(
            "bucket {}x{} has {} frames: videos are not sent (frames must be 1)",
            b.height, b.width, b.frames
        )));
    }
    if let Some(b) = d
        .bucket_config
        .iter()
        .find(|b| b.probability > 0.0 && (b.height == 0 || b.width == 0))
    {
        return Err(MediaSpecError(format!(
            "bucket {}x{} has no pixels",
            b.height, b.width
        )));
    }
    let total: f64 = d.bucket_config.iter().map(|b| b.probability).sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(MediaSpecError("no bucket has a probability above 0".into()));
    }
    Ok(d.bucket_config
        .iter()
        .filter(|b| b.probability > 0.0)
        .map(|b| (b, b.probability / total))
        .collect())
}

/// The text part's settings: `random`'s four keys.
fn text_spec(d: &RandomMmSpec) -> RandomSpec {
    RandomSpec {
        input_len: d.input_len.clone(),
        output_len: d.output_len.clone(),
        range_ratio: d.range_ratio,
        prefix_len: d.prefix_len,
        ..RandomSpec::default()
    }
}

/// `random-mm`: the `random` prompts, then each entry's images drawn in
/// entry order from a stream of their own (so the text is `random`'s).
pub(crate) fn build_random_mm(
    b: &Build<'_, RandomMmSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let (min, max) = item_bounds(d).map_err(|e| DatasetError::Invalid(e.0))?;
    let text = text_spec(d);
    let (mut entries, mut report) = random::build(&Build {
        d: &text,
        seed: b.seed,
        n: b.n,
        tokenizer: b.tokenizer,
        progress: b.progress,
    })?;
    report.kind = DatasetKind::RandomMm.name().to_string();
    let files = match &d.image_dir {
        Some(dir) => Some(read_dir(dir, &IMAGE_TYPES)?),
        None => None,
    };
    let buckets = match files {
        Some(_) => Vec::new(),
        None => image_buckets(d).map_err(|e| DatasetError::Invalid(e.0))?,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(b.seed);
    rng.set_stream(IMAGE_STREAM);
    for e in &mut entries {
        let count = rng.random_range(min..=max);
        e.media.images = (0..count)
            .map(|_| match &files {
                Some(files) => Image::File(files[rng.random_range(0..files.len())].clone()),
                None => {
                    let bucket = pick(&buckets, rng.random::<f64>());
                    Image::Synthetic {
                        width: bucket.width,
                        height: bucket.height,
                        seed: rng.random(),
                    }
                }
            })
            .collect();
    }
    Ok((entries, report))
}

/// The bucket at cumulative weight `u` in [0, 1).
fn pick<'a>(buckets: &[(&'a ImageBucket, f64)], u: f64) -> &'a ImageBucket {
    let mut acc = 0.0;
    for (b, w) in buckets {
        acc += w;
        if u < acc {
            return b;
        }
    }
    // rounding left `u` past the last sum
    buckets[buckets.len() - 1].0
}

/// `audio`: one clip per entry, from the directory's WAV files (in a
/// seeded order, cycled) or synthetic of drawn lengths.
pub(crate) fn build_audio(
    b: &Build<'_, AudioSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let d = b.d;
    let mut report = b.report();
    let mut rng = ChaCha8Rng::seed_from_u64(b.seed);
    rng.set_stream(AUDIO_STREAM);
    let clips: Vec<Audio> = match &d.path {
        Some(dir) => {
            let mut files = read_dir(dir, &[("wav", "audio/wav")])?;
            report.read = files.len() as u64;
            if d.shuffle {
                for i in (1..files.len()).rev() {
                    files.swap(i, rng.random_range(0..=i));
                }
            }
            files
                .into_iter()
                .cycle()
                .take(b.n as usize)
                .map(Audio::File)
                .collect()
        }
        None => {
            if !(d.duration > 0.0 && d.duration.is_finite() && (0.0..1.0).contains(&d.range_ratio))
            {
                return Err(DatasetError::Invalid(format!(
                    "audio clips of {} s within ±{}: the length must be above 0 and the ratio in [0, 1)",
                    d.duration, d.range_ratio
                )));
            }
            let ms = d.duration * 1000.0;
            let (lo, hi) = (
                (ms * (1.0 - d.range_ratio)).floor().max(1.0) as u32,
                (ms * (1.0 + d.range_ratio)).ceil().max(1.0) as u32,
            );
            report.read = b.n;
            (0..b.n)
                .map(|_| Audio::Synthetic {
                    duration_ms: rng.random_range(lo..=hi),
                    sample_rate: d.sample_rate,
                    seed: rng.random(),
                })
                .collect()
        }
    };
    report.kept = clips.len() as u64;
    let entries = clips
        .into_iter()
        .enumerate()
        .map(|(id, clip)| PoolEntry {
            id: id as u64,
            prompt: Prompt::Text("".into()),
            input_tokens: 0,
            output_tokens: d.output_len,
            conversation: None,
            shape: None,
            media: super::Media {
                images: Vec::new(),
                audio: Some(clip),
            },
        })
        .collect();
    Ok((entries, report))
}

/// The files of `dir` with one of `types`' extensions, by name, each read
/// once into an allocation every entry sending it shares.
fn read_dir(dir: &Path, types: &[(&str, &str)]) -> Result<Vec<Arc<MediaFile>>, DatasetError> {
    let read_error = |source| DatasetError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut paths: Vec<(std::path::PathBuf, &str)> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let ext = p.extension()?.to_str()?.to_ascii_lowercase();
            let mime = types.iter().find(|(e, _)| *e == ext)?.1;
            Some((p, mime))
        })
        .collect();
    paths.sort();
    let mut total = 0u64;
    let mut files = Vec::with_capacity(paths.len());
    for (p, mime) in paths {
        let bytes = std::fs::read(&p).map_err(|source| DatasetError::Read {
            path: p.display().to_string(),
            source,
        })?;
        total += bytes.len() as u64;
        if total > MEDIA_FILES_LIMIT_BYTES {
            return Err(DatasetError::Format {
                path: dir.display().to_string(),
                message: format!(
                    "its files pass {} MiB, the most a plan carries; use a smaller directory",
                    MEDIA_FILES_LIMIT_BYTES >> 20
                ),
            });
        }
        let name = p
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        files.push(Arc::new(MediaFile {
            mime: mime.to_string(),
            name,
            bytes: bytes.into(),
        }));
    }
    if files.is_empty() {
        let exts: Vec<&str> = types.iter().map(|(e, _)| *e).collect();
        return Err(DatasetError::Empty {
            origin: dir.display().to_string(),
            reason: format!("it holds no files ending in .{}", exts.join(", .")),
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;

    fn spec(toml_text: &str) -> RandomMmSpec {
        toml::from_str(toml_text).unwrap()
    }

    fn build(d: &RandomMmSpec, seed: u64, n: u64) -> Vec<PoolEntry> {
        build_random_mm(&Build {
            d,
            seed,
            n,
            tokenizer: None,
            progress: &Silent,
        })
        .unwrap()
        .0
    }

    /// Counts stay within vLLM's bounds, sizes come from the buckets, and
    /// the seed alone decides the pool (text as `random` makes it).
    #[test]
    fn images_follow_the_knobs_and_the_seed() {
        let d = spec(
            "input_len = 8\nbase_items_per_request = 2\nnum_mm_items_range_ratio = 0.5\n\
             limit_mm_per_prompt = { image = 2 }\n\
             bucket_config = [{ height = 16, width = 32, probability = 3.0 }, { height = 8, width = 8, probability = 1.0 }, { height = 9, width = 9, probability = 0.0, frames = 16 }]\n",
        );
        assert_eq!(item_bounds(&d), Ok((1, 2)));
        let pool = build(&d, 7, 400);
        let counts: Vec<usize> = pool.iter().map(|e| e.media.images.len()).collect();
        assert!(counts.iter().all(|c| (1..=2).contains(c)));
        assert!(counts.contains(&1) && counts.contains(&2));
        let big = pool
            .iter()
            .flat_map(|e| &e.media.images)
            .filter(|i| {
                matches!(
                    i,
                    Image::Synthetic {
                        width: 32,
                        height: 16,
                        ..
                    }
                )
            })
            .count();
        let all: usize = counts.iter().sum();
        let share = big as f64 / all as f64;
        assert!((0.65..0.85).contains(&share), "3:1 weights drew {share}");
        assert_eq!(pool, build(&d, 7, 400));
        assert_ne!(pool, build(&d, 8, 400));
        let text = text_spec(&d);
        let plain = random::build(&Build {
            d: &text,
            seed: 7,
            n: 400,
            tokenizer: None,
            progress: &Silent,
        })
        .unwrap()
        .0;
        assert!(pool.iter().zip(&plain).all(|(a, b)| a.prompt == b.prompt));
    }

    /// Knobs that cannot be drawn from are refused with the reason.
    #[test]
    fn impossible_knobs_are_refused() {
        let d = spec("base_items_per_request = 4\nlimit_mm_per_prompt = { image = 2 }\n");
        assert!(item_bounds(&d).unwrap_err().0.contains("allows 2"));
        let d =
            spec("bucket_config = [{ height = 9, width = 9, probability = 1.0, frames = 4 }]\n");
        assert!(image_buckets(&d).unwrap_err().0.contains("videos"));
        let d = spec("num_mm_items_range_ratio = 1.5\n");
        assert!(item_bounds(&d).is_err());
    }

    /// A directory's images are read once and shared; clips are cycled.
    #[test]
    fn directories_are_read_once_and_shared() {
        let dir = crate::dataset::testutil::Scratch::new("mm");
        std::fs::write(dir.0.join("a.png"), b"png-bytes").unwrap();
        std::fs::write(dir.0.join("b.JPG"), b"jpg").unwrap();
        std::fs::write(dir.0.join("notes.txt"), b"skip").unwrap();
        let mut d = spec("input_len = 4\nbase_items_per_request = 3\n");
        d.image_dir = Some(dir.0.clone());
        let pool = build(&d, 1, 20);
        let files: Vec<&Arc<MediaFile>> = pool
            .iter()
            .flat_map(|e| &e.media.images)
            .map(|i| match i {
                Image::File(f) => f,
                other => panic!("a file image, got {other:?}"),
            })
            .collect();
        assert_eq!(files.len(), 60);
        assert!(files.iter().any(|f| f.mime == "image/jpeg"));
        assert!(files.iter().all(|f| f.mime != "text/plain"));
        let a: Vec<_> = files.iter().filter(|f| f.name == "a.png").collect();
        assert!(a.windows(2).all(|w| Arc::ptr_eq(w[0], w[1])));
        std::fs::write(dir.0.join("c.wav"), b"RIFF").unwrap();
        let audio: AudioSpec = toml::from_str("output_len = 5\n").unwrap();
        let audio = AudioSpec {
            path: Some(dir.0.clone()),
            ..audio
        };
        let (clips, report) = build_audio(&Build {
            d: &audio,
            seed: 1,
            n: 3,
            tokenizer: None,
            progress: &Silent,
        })
        .unwrap();
        assert_eq!(report.read, 1);
        assert_eq!(clips.len(), 3);
        assert!(clips.iter().all(|e| e.output_tokens == Some(5)
            && matches!(&e.media.audio, Some(Audio::File(f)) if f.name == "c.wav")));
    }
}
