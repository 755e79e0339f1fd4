//! Issue 25, media: `random-mm` images in chat requests and `openai-audio`
//! transcription uploads, through real `cicada run` coordinator and worker
//! processes against `cicada mock`, judged against the mock's own count of
//! what arrived.

use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

fn images_scenario(url: &str) -> String {
    format!(
        r#"
name = "media"
seed = 9
[target]
backend = "vllm-chat"
base_url = "{url}"
[dataset]
kind = "random-mm"
input_len = 6
output_len = 4
base_items_per_request = 2
num_mm_items_range_ratio = 0.5
bucket_config = [
  {{ height = 24, width = 32, probability = 0.5 }},
  {{ height = 64, width = 48, probability = 0.5 }},
]
[load]
num_prompts = 30
request_rate = "inf"
max_concurrency = 5
[output]
save_detailed = true
"#
    )
}

/// Every image cicada counts arrived as an `image_url` data URL of that
/// many bytes; the same seed sends the same images with 1 worker or 3.
#[test]
fn random_mm_images_arrive_as_counted_for_any_worker_count() {
    let _g = serial();
    let mut totals = Vec::new();
    for workers in ["1", "3"] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1", "--api", "openai-chat"]);
        let dir = scratch();
        let (r, j) = run_scenario(
            dir.path(),
            "mm",
            &images_scenario(&mock.url),
            workers,
            &[],
            LIMIT,
        );
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(30), "{}", r.stdout);
        let counters = &j["cicada"]["counters"];
        let images = counters["images"].as_u64().unwrap();
        let bytes = counters["image_bytes"].as_u64().unwrap();
        let stats = mock.stats();
        assert_eq!(stats["images"].as_u64(), Some(images), "{stats}");
        assert_eq!(stats["image_bytes"].as_u64(), Some(bytes), "{stats}");
        // 1..=3 images a request, each 24x32 or 64x48 RGB, stored uncompressed
        assert!((30..=90).contains(&images), "{images}");
        assert!(bytes >= images * 24 * 32 * 3 && bytes <= images * (64 * 48 * 3 + 1024));
        // each record says what its request sent
        let lines = std::fs::read_to_string(dir.path().join("out-mm/requests.jsonl")).unwrap();
        let per_record: u64 = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| v["images"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(per_record, images);
        let mut sent: Vec<(u64, u64)> = mock
            .requests()
            .iter()
            .map(|q| {
                (
                    q["prompt_fingerprint"].as_u64().unwrap(),
                    q["images"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        sent.sort();
        totals.push((images, bytes, sent));
    }
    assert_eq!(totals[0], totals[1], "the pool does not depend on workers");
}

/// The same seeded images go out in Responses' `input_image` parts and
/// Messages' base64 `image` blocks, streamed and not: the mock finds every
/// one cicada counts, of the bytes it counts, and they are the chat run's.
#[test]
fn random_mm_images_arrive_in_responses_and_messages_requests() {
    let _g = serial();
    let mut seen = Vec::new();
    for (backend, stream) in [
        ("vllm-chat", true),
        ("openai-responses", true),
        ("openai-responses", false),
        ("anthropic-messages", true),
        ("anthropic-messages", false),
    ] {
        let api = if backend == "vllm-chat" {
            "openai-chat"
        } else {
            backend
        };
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1", "--api", api]);
        let dir = scratch();
        let text = images_scenario(&mock.url).replace(
            "backend = \"vllm-chat\"",
            &format!("backend = \"{backend}\"\nstream = {stream}"),
        );
        let (r, j) = run_scenario(dir.path(), "mm", &text, "2", &[], LIMIT);
        assert_ok(&r);
        let what = format!("{backend} stream={stream}");
        assert_eq!(j["completed"].as_u64(), Some(30), "{what}\n{}", r.stdout);
        let counters = &j["cicada"]["counters"];
        let (images, bytes) = (
            counters["images"].as_u64().unwrap(),
            counters["image_bytes"].as_u64().unwrap(),
        );
        let stats = mock.stats();
        assert_eq!(stats["images"].as_u64(), Some(images), "{what}: {stats}");
        assert_eq!(
            stats["image_bytes"].as_u64(),
            Some(bytes),
            "{what}: {stats}"
        );
        assert!(images >= 30, "{what}: {images}");
        seen.push((images, bytes));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}

fn audio_scenario(url: &str, stream: bool) -> String {
    format!(
        r#"
name = "audio"
seed = 3
[target]
backend = "openai-audio"
base_url = "{url}"
stream = {stream}
[dataset]
kind = "audio"
duration = 0.5
range_ratio = 0.5
sample_rate = 8000
output_len = 6
[load]
num_prompts = 12
request_rate = "inf"
max_concurrency = 4
"#
    )
}

/// Synthetic clips go up as multipart uploads; streamed answers are read
/// as vLLM streams them (chat chunks), whole ones by their `text`.
#[test]
fn openai_audio_uploads_clips_streamed_and_whole() {
    let _g = serial();
    for stream in [true, false] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1", "--api", "openai-chat"]);
        let dir = scratch();
        let (r, j) = run_scenario(
            dir.path(),
            "audio",
            &audio_scenario(&mock.url, stream),
            "2",
            &[],
            LIMIT,
        );
        assert_ok(&r);
        assert_eq!(
            j["completed"].as_u64(),
            Some(12),
            "stream {stream}: {}",
            r.stdout
        );
        let stats = mock.stats();
        assert_eq!(stats["audio_files"].as_u64(), Some(12), "{stats}");
        let bytes = j["cicada"]["counters"]["audio_bytes"].as_u64().unwrap();
        assert_eq!(stats["audio_bytes"].as_u64(), Some(bytes), "{stats}");
        // 0.25 s .. 0.75 s of 16-bit samples at 8 kHz, 44-byte headers
        assert!(
            (12 * (44 + 4000)..=12 * (44 + 12_000)).contains(&bytes),
            "{bytes}"
        );
        if stream {
            assert_eq!(j["total_output_tokens"].as_u64(), Some(12 * 6));
            assert!(j["mean_ttft_ms"].as_f64().unwrap() >= 2.0);
        } else {
            // a whole transcription carries no token count: one event each
            assert_eq!(j["total_output_tokens"].as_u64(), Some(12));
        }
        assert!(
            mock.requests()
                .iter()
                .all(|q| q["path"] == "/v1/audio/transcriptions" && q["max_tokens"] == 6),
            "{:?}",
            mock.requests().first()
        );
    }
}
