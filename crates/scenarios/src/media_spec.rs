//! The `[dataset]` keys of the workloads that send images or audio:
//! `random-mm` (vLLM's names and defaults) and `audio`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::length_spec::Length;

/// One image size of `random-mm` and how often it is drawn (vLLM's
/// `--random-mm-bucket-config` entry `(height, width, 1): probability`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageBucket {
    /// Image height in pixels.
    pub height: u32,
    /// Image width in pixels.
    pub width: u32,
    /// Relative weight (the weights are normalised to sum to 1).
    pub probability: f64,
    /// Frames: 1 is an image (vLLM's videos, more frames, are not sent).
    #[serde(default = "n1")]
    pub frames: u32,
}

fn n1() -> u32 {
    1
}

fn default_buckets() -> Vec<ImageBucket> {
    [(256, 256), (720, 1280)]
        .into_iter()
        .map(|(height, width)| ImageBucket {
            height,
            width,
            probability: 0.5,
            frames: 1,
        })
        .collect()
}

/// Per-modality caps of `random-mm` (vLLM's `--random-mm-limit-mm-per-prompt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmLimits {
    /// Most images in one request.
    #[serde(default = "n255")]
    pub image: u32,
    /// Most videos in one request (videos are not sent: only 0 is taken).
    #[serde(default)]
    pub video: u32,
}

fn n255() -> u32 {
    255
}

impl Default for MmLimits {
    fn default() -> Self {
        Self {
            image: n255(),
            video: 0,
        }
    }
}

/// `kind = "random-mm"`: `random` prompts (its four keys) with images,
/// by vLLM's `random-mm` rules and names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomMmSpec {
    /// Prompt length in tokens (of the text), or its distribution.
    #[serde(default = "crate::dataset_spec::len1024")]
    pub input_len: Length,
    /// Output tokens asked of the server, or their distribution.
    #[serde(default = "crate::dataset_spec::len128")]
    pub output_len: Length,
    /// Plain lengths are drawn uniformly within ±ratio of the asked length.
    #[serde(default)]
    pub range_ratio: f64,
    /// Tokens of a random prefix shared by every prompt.
    #[serde(default)]
    pub prefix_len: u32,
    /// Images per request, about (vLLM's `--random-mm-base-items-per-request`).
    #[serde(default = "n1")]
    pub base_items_per_request: u32,
    /// The count is drawn uniformly from [floor(n(1-r)), ceil(n(1+r))]
    /// (vLLM's `--random-mm-num-mm-items-range-ratio`).
    #[serde(default)]
    pub num_mm_items_range_ratio: f64,
    /// Most items per request, by modality.
    #[serde(default)]
    pub limit_mm_per_prompt: MmLimits,
    /// Image sizes and their weights (vLLM's `--random-mm-bucket-config`).
    #[serde(default = "default_buckets")]
    pub bucket_config: Vec<ImageBucket>,
    /// Draw images from the files of this directory (PNG, JPEG, WebP, GIF)
    /// instead of making synthetic ones; `bucket_config` is then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_dir: Option<PathBuf>,
}

/// `kind = "audio"`: clips to transcribe, from a directory of WAV files or
/// synthetic (a tone under seeded noise, of drawn lengths).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioSpec {
    /// A directory of `.wav` files (absent: synthetic clips).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Synthetic clips: length in seconds.
    #[serde(default = "one")]
    pub duration: f64,
    /// Synthetic clips: lengths drawn uniformly within ±ratio of `duration`.
    #[serde(default)]
    pub range_ratio: f64,
    /// Synthetic clips: samples per second.
    #[serde(default = "n16000")]
    pub sample_rate: u32,
    /// Output tokens asked of the server (`max_completion_tokens`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// Shuffle the files by the seed before taking entries.
    #[serde(default = "yes")]
    pub shuffle: bool,
}

fn n16000() -> u32 {
    16_000
}

// defaults, named for serde (the same as `dataset_spec`'s)
fn yes() -> bool {
    true
}
fn one() -> f64 {
    1.0
}
